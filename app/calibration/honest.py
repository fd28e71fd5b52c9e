"""The per-GPU report of a regularised calibration: which coefficients moved, and the
cross-validated error with its spread (issue 12 item 8). Shared by ``planner calibrate``, the
calibration endpoint and the web calibration page through :mod:`app.calibration.fit`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from planner.calibration.fit import ErrorStats
from planner.calibration.honest_cv import HonestCV, cross_validate_prepared
from planner.calibration.measurements import Measurement
from planner.calibration.regularised import RegularisedFit, fit_prepared, prepare
from planner.performance.profile import PerformanceProfile

Progress = Callable[[str, int, int], None]
"""(what, done, total): called as the calibration advances."""


def num(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 4)


def stats(s: ErrorStats) -> dict[str, float | int | None]:
    return {"n": s.n, "median_ape": num(s.median_ape), "p90_ape": num(s.p90_ape)}


def group_key(m: Measurement, group_by: str) -> str:
    return m.source_id if group_by == "source" else (m.sweep_id or m.row_id)


def calibrate_gpu_rows(
    rows: list[Measurement],
    prior: PerformanceProfile,
    *,
    group_by: str = "sweep",
    progress: Progress | None = None,
    label: str = "",
) -> tuple[PerformanceProfile, dict[str, Any]]:
    """Fit ``prior`` to the rows of one GPU type; (profile, report)."""
    if progress is not None:
        progress(f"{label}: sensitivity", 0, 1)
    prepared = prepare(rows, prior)
    fit = fit_prepared(prepared)
    if progress is not None:
        progress(f"{label}: fit", 1, 1)

    def fold_progress(done: int, total: int) -> None:
        if progress is not None:
            progress(f"{label}: cross-validation", done, total)

    keys = [group_key(m, group_by) for m in prepared.rows]
    cv = cross_validate_prepared(prepared, keys, group_name=group_by, progress=fold_progress)
    return fit.profile, {
        "rows": fit.n_rows,
        "fit": fit_json(fit),
        "coefficients": [c.to_dict() for c in fit.coefficients],
        "moved": [c.name for c in fit.moved],
        "cross_validation": cv_json(cv, group_by, len(set(keys))),
    }


def fit_json(fit: RegularisedFit) -> dict[str, Any]:
    return {
        "method": "regularised: log-space ridge toward the prior, identified coefficients only",
        "before": stats(fit.before),
        "after": stats(fit.after),
        "coefficients_before": {c.name: c.prior for c in fit.coefficients},
        "coefficients_after": {c.name: c.fitted for c in fit.coefficients},
        "success": True,
        "prediction_calls": fit.iterations,
    }


def cv_json(cv: HonestCV | None, group_by: str, groups: int) -> dict[str, Any]:
    if cv is None:
        return {
            "group_by": group_by,
            "groups": groups,
            "note": "cross-validation needs at least 3 usable rows",
        }
    before, after = stats(cv.before), stats(cv.after)
    folds = [x for x in cv.fold_median_ape if not math.isnan(x)]
    return {
        "group_by": group_by,
        "groups": groups,
        "method": cv.method,
        "folds": cv.folds,
        "before": before,
        "after": after,
        "median_ape_before": before["median_ape"],
        "median_ape_after": after["median_ape"],
        "p90_ape_before": before["p90_ape"],
        "p90_ape_after": after["p90_ape"],
        "fold_median_ape": [num(x) for x in cv.fold_median_ape],
        "fold_median_ape_range": [num(min(folds)), num(max(folds))] if folds else None,
        "predictions": cv.predictions,
    }
