"""Calibration service: measured rows -> fitted performance profiles with honest errors.

Shared by ``planner calibrate``, the calibration endpoints and the web UI. "Before" is the
profile the planner uses today for that GPU (shipped default or architecture priors); "after"
is the profile fitted on the rows. Both errors are cross-validated: each group (source or
sweep) is predicted by a profile fitted without it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from app.planning.compute import gpu_from_type_string
from models_db.catalog import network_bytes_per_s
from models_db.measurement_models import model_for_measurement
from models_db.profiles import load_profile
from planner.calibration import ErrorStats, cross_validate, fit_profile, usable
from planner.measurements import Measurement, parse_rows
from planner.specs import SpecError


def _stats(stats: ErrorStats) -> dict[str, float | int | None]:
    def num(x: float) -> float | None:
        return None if math.isnan(x) else round(x, 4)

    return {"n": stats.n, "median_ape": num(stats.median_ape), "p90_ape": num(stats.p90_ape)}


def calibrate_measurements(
    measurements: list[Measurement], *, group_by: str = "sweep"
) -> dict[str, Any]:
    """Fit one profile per GPU type; report in-sample fit and cross-validated error."""
    by_gpu: dict[str, list[Measurement]] = defaultdict(list)
    for m in usable(measurements):
        by_gpu[m.cluster.gpu.name].append(m)
    if not by_gpu:
        raise SpecError(
            "no usable measurement: each row needs the model shape, the layout and a measured "
            "tokens/s per GPU, step time or TFLOP/s, and reliability other than 'low'",
            field="measurements",
        )
    gpus: dict[str, Any] = {}
    profiles: dict[str, Any] = {}
    for gpu_name, rows in sorted(by_gpu.items()):
        base = load_profile(rows[0].cluster.gpu)
        profile, fit = fit_profile(rows, base)
        groups = {m.source_id if group_by == "source" else (m.sweep_id or m.row_id) for m in rows}
        cv: dict[str, Any]
        if len(groups) >= 2:
            report = cross_validate(rows, lambda gpu: load_profile(gpu), group_by=group_by)
            cv = {
                "group_by": group_by,
                "groups": len(groups),
                "before": _stats(report.before),
                "after": _stats(report.after),
                "median_ape_before": _stats(report.before)["median_ape"],
                "median_ape_after": _stats(report.after)["median_ape"],
                "p90_ape_before": _stats(report.before)["p90_ape"],
                "p90_ape_after": _stats(report.after)["p90_ape"],
                "predictions": report.predictions,
            }
        else:
            cv = {
                "group_by": group_by,
                "groups": len(groups),
                "note": f"cross-validation needs rows from at least two {group_by}s",
            }
        gpus[gpu_name] = {
            "rows": len(rows),
            "fit": {
                "before": _stats(fit.before),
                "after": _stats(fit.after),
                "coefficients_before": fit.values_before,
                "coefficients_after": fit.values_after,
                "success": fit.success,
            },
            "cross_validation": cv,
        }
        profiles[gpu_name] = profile.to_dict()
    return {"gpus": gpus, "profiles": profiles}


def calibrate_rows(rows: list[dict[str, str]], *, group_by: str = "sweep") -> dict[str, Any]:
    """Parse rows with the shared CSV's columns, then :func:`calibrate_measurements`."""
    if group_by not in ("source", "sweep"):
        raise SpecError(f"group_by={group_by!r} is not one of source, sweep", field="group_by")
    measurements, skipped = parse_rows(
        rows,
        gpu_from_type_string,
        network_bytes_per_s=network_bytes_per_s,
        model_lookup=model_for_measurement,
    )
    report = calibrate_measurements(measurements, group_by=group_by)
    report["skipped"] = [f"{s.row_id or '?'}: {s.reason}" for s in skipped]
    return report
