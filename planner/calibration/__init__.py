"""Fitting performance profiles to measurements, and transferring them across GPUs."""

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
