"""The planning functions the service calls, passed in rather than imported globally.

The default backend is ``app.planning.compute`` (a plain import, loaded on first use); tests
hand ``create_app`` (or ``run_worker``) another one, or ``default_backend(plan=fake)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Runner = Callable[..., dict[str, Any]]


def _plan(request: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    from app.planning.compute import plan_request  # the search stack loads optuna: lazily

    return plan_request(request, **kwargs).raw  # the typed answer's JSON, stored on the job


def _evaluate(request: dict[str, Any], *, profile: Any = None) -> dict[str, Any]:
    from app.planning.compute import evaluate_request

    return evaluate_request(request, profile=profile).raw


def _validate_plan(request: dict[str, Any]) -> dict[str, Any]:
    """Resolve what a plan request names, raising SpecError now rather than in the job."""
    from app.planning import compute as planning

    model, gpu = planning.validate_plan_request(request)
    return {"model": model.to_dict(), "gpu": gpu.to_dict()}


def _check_measurements(rows: list[dict[str, str]]) -> int:
    from app.calibration.fit import check_measurements

    return check_measurements(rows)


def _calibrate(rows: list[dict[str, str]], gpu: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from app.calibration.fit import calibrate_gpu

    return calibrate_gpu(rows, gpu)


def _evaluate_bulk(common: dict[str, Any], columns: dict[str, Any], **kwargs: Any) -> Any:
    from app.planning.bulk import evaluate_bulk

    return evaluate_bulk(common, columns, **kwargs)


def _profile(data: dict[str, Any]) -> Any:
    from planner import PerformanceProfile

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
    """(job fields, layout columns, *, profile=None) -> app.planning.bulk.BulkResult."""

    def profile_for(self, resolved: dict[str, Any]) -> Any:
        """The profile a request runs with: its cluster's newest calibration, else None."""
        data = resolved.get("profile")
        return self.load_profile(data["profile"]) if data else None


def default_backend(plan: Runner | None = None) -> PlanningBackend:
    """The planner's functions; ``plan`` replaces the search (a test's fake runner)."""
    return PlanningBackend(evaluate=_evaluate, plan=plan or _plan, validate_plan=_validate_plan)
