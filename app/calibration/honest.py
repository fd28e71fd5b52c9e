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
    decision = fit_decision(cv)
    kept = decision["kept_prior"]
    return (prior if kept else fit.profile), {
        "rows": fit.n_rows,
        "fit": fit_json(fit),
        "decision": decision,
        "coefficients": [
            {**c.to_dict(), "moved": False} if kept else c.to_dict() for c in fit.coefficients
        ],
        "moved": [] if kept else [c.name for c in fit.moved],
        "cross_validation": cv_json(cv, group_by, len(set(keys))),
    }


def fit_decision(cv: HonestCV | None) -> dict[str, Any]:
    """Keep the fit only if it predicts held-out rows better than the prior does.

    Model selection by cross-validation between the two candidates the rows can judge (the
    prior, and the regularised fit): a fit whose held-out median error is worse than the prior's
    has learnt the rows' noise or a mechanism the model lacks, and would carry that to every
    other layout. Below ``MIN_ROWS`` rows there is no held-out figure, and the fit is kept (its
    ridge already holds it near the prior)."""
    if cv is None or math.isnan(cv.after.median_ape) or math.isnan(cv.before.median_ape):
        return {"kept_prior": False, "reason": "too few rows to cross-validate; the fit is kept"}
    if cv.after.median_ape > cv.before.median_ape:
        return {
            "kept_prior": True,
            "reason": (
                f"the fit predicts held-out rows worse than the prior "
                f"({100 * cv.after.median_ape:.1f} % vs {100 * cv.before.median_ape:.1f} % "
                "median error), so the prior profile is kept"
            ),
        }
    return {
        "kept_prior": False,
        "reason": (
            f"the fit predicts held-out rows at {100 * cv.after.median_ape:.1f} % median error "
            f"(the prior: {100 * cv.before.median_ape:.1f} %)"
        ),
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
        "noise": noise_json(fit),
    }


def noise_json(fit: RegularisedFit) -> dict[str, Any]:
    """The row noise the fit assumed: rows of one campaign (a source on one GPU type) share an
    error, so they count as fewer independent rows (planner.calibration.noise)."""
    prov = fit.profile.provenance
    within, shared = float(prov["noise_log_sd"]), float(prov["shared_noise_log_sd"])
    return {
        "within_log_sd": within,
        "shared_log_sd": shared,
        "rho": round(shared**2 / (shared**2 + within**2), 4),
        "campaigns": prov["campaigns"],
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
