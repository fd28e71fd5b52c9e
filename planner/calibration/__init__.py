"""Calibrating the throughput model on measured runs, and saying how sure a prediction is.

* measurements: the measured-throughput rows as domain objects (``measurements``,
  ``measurement_arch``);
* fitting: the bounded least-squares fit and its cross-validation (``fit``); the cluster's level
  fitted first (``level``); the regularised fit of only what the rows identify (``regularised``,
  ``identify``, ``honest_cv``); transfer to GPUs without measurements (``transfer``);
* noise: rows of one campaign share their errors (``noise``);
* intervals: prediction bands from held-out residuals and extrapolation flags (``intervals``,
  ``interval_bands``);
* suggestions: the short runs that most reduce a plan's uncertainty (``suggest``,
  ``suggest_proxy``).

The names below are the fitting entry points; the rest are imported from their modules.
"""

from planner.calibration.fit import (
    DEFAULT_COEFFICIENTS,
    CVReport,
    ErrorStats,
    cross_validate,
    fit_profile,
    predict_tokens_per_s,
    usable,
)
from planner.calibration.measurements import (
    Measurement,
    SkippedRow,
    default_network_bytes_per_s,
    gpu_slug,
    parse_rows,
    read_rows,
)
from planner.calibration.transfer import transfer_profile, transferable

__all__ = [
    "DEFAULT_COEFFICIENTS",
    "CVReport",
    "ErrorStats",
    "Measurement",
    "SkippedRow",
    "cross_validate",
    "default_network_bytes_per_s",
    "fit_profile",
    "gpu_slug",
    "parse_rows",
    "predict_tokens_per_s",
    "read_rows",
    "transfer_profile",
    "transferable",
    "usable",
]
