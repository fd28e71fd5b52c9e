"""Calibration: measured rows -> fitted performance profiles with honest errors.

The one orchestration (parse the rows, keep the usable ones, fit, report) shared by
``planner calibrate``, the calibration endpoints (through the planning backend) and the web
UI's preview. "Before" is the
profile the planner uses today for that GPU (shipped default or architecture priors); "after"
is the profile fitted on the rows. Both errors are cross-validated: each group (source or
sweep) is predicted by a profile fitted without it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import models_db
from app.calibration.honest import Progress, calibrate_gpu_rows, kept_cv, percent
from app.catalog.names import gpu_slug_for
from models_db.catalog import network_bytes_per_s
from models_db.measurement_models import model_for_measurement
from models_db.profiles import load_profile
from planner import GPUSpec, PerformanceProfile, SpecError
from planner.calibration import predict_tokens_per_s, usable
from planner.calibration.measurements import Measurement, SkippedRow, parse_rows


def gpu_from_type_string(text: str) -> GPUSpec:
    """The catalog GPU for a free-text GPU type as measurement files and logs write it
    ('A100-SXM4-80GB', 'H100 (DGX-H100)', 'H200'): the request's aliases, named ``gpu_type``."""
    try:
        return models_db.load_gpu(gpu_slug_for(text, free_text=True))
    except SpecError as exc:
        raise SpecError(exc.message, field="gpu_type") from exc


def parse_measurement_rows(
    rows: list[dict[str, str]],
) -> tuple[list[Measurement], list[SkippedRow]]:
    """Rows with the shared CSV's columns -> measurements, and the rows skipped with reasons."""
    return parse_rows(
        rows,
        gpu_from_type_string,
        network_bytes_per_s=network_bytes_per_s,
        model_lookup=model_for_measurement,
    )


def check_measurements(rows: list[dict[str, str]]) -> int:
    """How many rows the calibration can use; SpecError naming the reasons when none."""
    measurements, skipped = parse_measurement_rows(rows)
    if not measurements:
        reasons = "; ".join(f"{s.row_id or '?'}: {s.reason}" for s in skipped[:5])
        raise SpecError(f"no usable measurement row ({reasons})", field="rows")
    return len(measurements)


def calibrate_gpu(rows: list[dict[str, str]], gpu: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fit the profile of ``gpu`` to the rows: (profile JSON, report with CV error)."""
    report = calibrate_rows(rows, group_by="sweep")
    if gpu not in report["profiles"]:
        raise SpecError(
            f"no usable measurement of GPU {gpu!r} (found: {', '.join(report['profiles'])})",
            field="measurements",
        )
    profile = report["profiles"][gpu]
    # what the calibration page shows, from this fit (stored apart by the service)
    comparison = fitted_comparison(rows, gpu, profile, report["gpus"][gpu])
    return profile, {
        "gpu": gpu,
        **report["gpus"][gpu],
        "skipped": report.get("skipped", []),
        "comparison": comparison,
    }


def calibrate_measurements(
    measurements: list[Measurement],
    *,
    group_by: str = "sweep",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Fit one profile per GPU type (regularised, identified coefficients only); report which
    coefficients moved and the cross-validated error with its spread (app.calibration.honest)."""
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
        profile, gpus[gpu_name] = calibrate_gpu_rows(
            rows,
            load_profile(rows[0].cluster.gpu),
            group_by=group_by,
            progress=progress,
            label=gpu_name,
        )
        profiles[gpu_name] = profile.to_dict()
    return {"gpus": gpus, "profiles": profiles}


def calibrate_rows(
    rows: list[dict[str, str]], *, group_by: str = "sweep", progress: Progress | None = None
) -> dict[str, Any]:
    """Parse rows with the shared CSV's columns, then :func:`calibrate_measurements`."""
    if group_by not in ("source", "sweep"):
        raise SpecError(f"group_by={group_by!r} is not one of source, sweep", field="group_by")
    measurements, skipped = parse_measurement_rows(rows)
    report = calibrate_measurements(measurements, group_by=group_by, progress=progress)
    report["skipped"] = [f"{s.row_id or '?'}: {s.reason}" for s in skipped]
    return report


COMPARISON_VERSION = 1
"""Version of what :func:`fit_preview` returns; a stored comparison of another version is
computed again (app.calibration.service.CalibrationService.comparison)."""


def gpu_rows(
    rows: list[dict[str, str]], gpu_slug: str
) -> tuple[GPUSpec, list[Measurement], list[SkippedRow], int]:
    """(GPU, its usable rows, the rows skipped, how many rows are of other GPUs); SpecError
    naming the file when none is usable, and why (often rows of another GPU than the cluster's)."""
    gpu = gpu_from_type_string(gpu_slug)
    parsed, skipped = parse_measurement_rows(rows)
    measurements = [m for m in parsed if m.cluster.gpu.name == gpu.name]
    others = len(parsed) - len(measurements)
    rows_used = usable(measurements)
    if not rows_used:
        reasons = [f"{s.row_id or '?'}: {s.reason}" for s in skipped[:3]]
        if others:  # the usual cause: rows of another GPU than the chosen cluster's
            found = sorted({m.cluster.gpu.name for m in parsed} - {gpu.name})
            reasons.insert(
                0,
                f"{others} rows are of {', '.join(found)}, not {gpu.name}: "
                "choose the cluster preset of their GPU",
            )
        detail = f" ({'; '.join(reasons)})" if reasons else ""
        raise SpecError(f"no usable measurement rows{detail}", field="file")
    return gpu, rows_used, skipped, others


def fit_preview(rows: list[dict[str, str]], gpu_slug: str) -> dict[str, Any]:
    """Fit the profile of ``gpu_slug`` to ``rows``; the points and errors before and after."""
    gpu, rows_used, skipped, others = gpu_rows(rows, gpu_slug)
    base = load_profile(gpu)
    fitted, honest = calibrate_gpu_rows(rows_used, base, label=gpu.name)
    return _comparison(gpu, rows_used, skipped, others, base, fitted, honest)


def fitted_comparison(
    rows: list[dict[str, str]], gpu_slug: str, profile: dict[str, Any], report: dict[str, Any]
) -> dict[str, Any]:
    """:func:`fit_preview`'s answer for a fit already made (``profile`` and ``report`` of
    :func:`calibrate_gpu`, on the same ``rows``): the rows predicted before and after, no fit."""
    gpu, rows_used, skipped, others = gpu_rows(rows, gpu_slug)
    fitted = PerformanceProfile.from_dict(profile)
    return _comparison(gpu, rows_used, skipped, others, load_profile(gpu), fitted, report)


STORED_REPORT_KEYS = ("rows", "fit", "coefficients", "cross_validation")
"""What :func:`_comparison` reads of a report: a calibration stored before the honest fit
(2026-11-24) has a report without them."""


def stored_comparison(
    rows: list[dict[str, str]], gpu_slug: str, profile: dict[str, Any], report: dict[str, Any]
) -> dict[str, Any]:
    """:func:`fit_preview`'s answer for a calibration stored without it: its rows predicted with
    the profile it stored (the one planning uses; a fit run again today, with today's fitting
    code, may give another), fitting nothing; a report too old to carry the errors is fitted
    again."""
    if all(key in report for key in STORED_REPORT_KEYS):
        return fitted_comparison(rows, gpu_slug, profile, report)
    return fit_preview(rows, gpu_slug)


def _comparison(
    gpu: GPUSpec,
    rows_used: list[Measurement],
    skipped: list[SkippedRow],
    others: int,
    base: PerformanceProfile,
    fitted: PerformanceProfile,
    honest: dict[str, Any],
) -> dict[str, Any]:
    before = predict_tokens_per_s(rows_used, base)
    after = predict_tokens_per_s(rows_used, fitted)
    fit = honest["fit"]
    points_before, points_after = [], []
    for m, b, a in zip(rows_used, before, after, strict=True):
        measured = float(m.tokens_per_s_per_gpu or 0.0)
        label = f"{m.row_id} {m.model.name} {m.cluster.num_gpus} GPUs"
        points_before.append({"x": round(measured, 1), "y": round(float(b), 1), "label": label})
        points_after.append({"x": round(measured, 1), "y": round(float(a), 1), "label": label})
    return {
        "version": COMPARISON_VERSION,
        "chart": {"kind": "calibration", "before": points_before, "after": points_after},
        "n_rows": honest["rows"],
        "before": _percent(fit["before"]),
        "after": _percent(fit["after"]),
        "coefficients": [(c["name"], c["prior"], c["fitted"]) for c in honest["coefficients"]],
        "report": honest,
        "cv": {
            "method": honest["cross_validation"].get("method"),
            "before": _percent(honest["cross_validation"].get("before")),
            "after": _percent(kept_cv(honest)),
            "note": honest["cross_validation"].get("note"),
        },
        "skipped": [(s.row_id, s.reason) for s in skipped],
        "other_gpus": others,
        "gpu": gpu.name,
    }


def _percent(stats: dict[str, Any] | None) -> dict[str, str]:
    def pct(v: float | None) -> str:
        return percent(None if v is None or math.isnan(v) else v)

    stats = stats or {}
    return {"median": pct(stats.get("median_ape")), "p90": pct(stats.get("p90_ape"))}
