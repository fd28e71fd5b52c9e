"""The planning functions the service calls, passed in rather than imported globally.

The default backend is ``app.planning`` (loaded on first use); tests and scale-out deployments
can hand ``create_app`` another one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Runner = Callable[..., dict[str, Any]]


def load_callable(path: str) -> Runner:
    """``module:function`` -> the function."""
    module_name, _, attr = path.partition(":")
    func: Runner = getattr(importlib.import_module(module_name), attr)
    return func


def _evaluate(request: dict[str, Any], *, profile: Any = None) -> dict[str, Any]:
    from app.planning import evaluate_request

    return evaluate_request(request, profile=profile)


def _validate_plan(request: dict[str, Any]) -> dict[str, Any]:
    """Resolve what a plan request names, raising SpecError now rather than in the job."""
    from app import planning

    model, gpu = planning.validate_plan_request(request)
    return {"model": model.to_dict(), "gpu": gpu.to_dict()}


def _check_measurements(rows: list[dict[str, str]]) -> int:
    """How many rows the calibration can use; SpecError naming the reasons when none."""
    from app.planning import gpu_from_type_string
    from models_db.catalog import network_bytes_per_s
    from models_db.measurement_models import model_for_measurement
    from planner.calibration.measurements import parse_rows
    from planner.specs import SpecError

    measurements, skipped = parse_rows(
        rows,
        gpu_from_type_string,
        network_bytes_per_s=network_bytes_per_s,
        model_lookup=model_for_measurement,
    )
    if not measurements:
        reasons = "; ".join(f"{s.row_id or '?'}: {s.reason}" for s in skipped[:5])
        raise SpecError(f"no usable measurement row ({reasons})", field="rows")
    return len(measurements)


def _calibrate(rows: list[dict[str, str]], gpu: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fit the profile of ``gpu`` to the rows: (profile JSON, report with CV error)."""
    from app.calibration import calibrate_rows
    from planner.specs import SpecError

    report = calibrate_rows(rows, group_by="sweep")
    if gpu not in report["profiles"]:
        raise SpecError(
            f"no usable measurement of GPU {gpu!r} (found: {', '.join(report['profiles'])})",
            field="measurements",
        )
    return report["profiles"][gpu], {
        "gpu": gpu,
        **report["gpus"][gpu],
        "skipped": report.get("skipped", []),
    }


def _evaluate_bulk(common: dict[str, Any], columns: dict[str, Any], **kwargs: Any) -> Any:
    from app.bulk_evaluation import evaluate_bulk

    return evaluate_bulk(common, columns, **kwargs)


def _profile(data: dict[str, Any]) -> Any:
    from planner.performance.step_time import PerformanceProfile

    return PerformanceProfile.from_dict(data)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanningBackend:
    evaluate: Runner
    """``evaluate_request(request, *, profile=None) -> dict``."""
    plan: Runner
    """``plan_request(request, *, profile=None, progress=None) -> dict``."""
    validate_plan: Callable[[dict[str, Any]], dict[str, Any]]
    """Raise SpecError for a request that cannot run; return the specs it resolves to."""
    load_profile: Callable[[dict[str, Any]], Any] = field(default=lambda data: _profile(data))
    """A stored calibration profile (JSON) -> the object ``profile=`` expects."""

    check_measurements: Callable[[list[dict[str, str]]], int] = field(
        default=lambda rows: _check_measurements(rows)
    )
    """Rows -> how many are usable; SpecError when none is."""
    calibrate: Callable[[list[dict[str, str]], str], tuple[dict[str, Any], dict[str, Any]]] = field(
        default=lambda rows, gpu: _calibrate(rows, gpu)
    )
    """(rows, gpu slug) -> (profile JSON, report with cross-validated error before/after)."""

    evaluate_bulk: Callable[..., Any] = field(
        default=lambda common, columns, **kw: _evaluate_bulk(common, columns, **kw)
    )
    """(job fields, layout columns, *, profile=None) -> app.bulk_evaluation.BulkResult."""

    def profile_for(self, resolved: dict[str, Any]) -> Any:
        """The profile a request runs with: its cluster's newest calibration, else None."""
        data = resolved.get("profile")
        return self.load_profile(data["profile"]) if data else None


def default_backend(job_runner: str = "app.planning:plan_request") -> PlanningBackend:
    def plan(request: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return load_callable(job_runner)(request, **kwargs)

    return PlanningBackend(evaluate=_evaluate, plan=plan, validate_plan=_validate_plan)
