"""Scaling curves: the best plan at each GPU count of a range, and what it means for a run.

For each count: tokens/s of the best layout, scaling efficiency (tokens/s per GPU relative to
the smallest count that has a feasible layout), and, given a token budget, days and GPU-hours
to train and the cost at a price per GPU-hour. Shared by the CLI (``planner scale``), the API
(``POST /v1/scaling-curves``) and the web page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.planning.reports import PlanAnswer, ScalingCurve, ScalingPoint, plan_answer
from app.planning.schemas import MAX_SCALING_POINTS
from planner.specs import SpecError

SECONDS_PER_DAY = 86_400.0
SECONDS_PER_HOUR = 3_600.0
PlanRunner = Callable[..., dict[str, Any]]


def gpu_counts(request: dict[str, Any]) -> list[int]:
    """The GPU counts a request names: num_gpus_options (list, 'a,b' or 'lo-hi') or num_gpus."""
    from app.planning.convert import int_list

    value = request.get("num_gpus_options")
    if value is None:
        value = request.get("num_gpus")
    if value is None:
        raise SpecError(
            "the GPU counts are required: num_gpus_options, a list such as [64, 128, 256]"
            " (a range such as 64-4096 on the command line and the web form)",
            field="num_gpus_options",
        )
    counts = int_list(value, "num_gpus")
    if len(counts) > MAX_SCALING_POINTS:
        raise SpecError(
            f"{len(counts)} GPU counts; a scaling curve has at most {MAX_SCALING_POINTS} points",
            field="num_gpus",
        )
    return counts


def _point(n: int, result: PlanAnswer) -> ScalingPoint:
    if not result.plans:
        reasons = sorted(result.rejections.items(), key=lambda kv: -kv[1])[:3]
        why = "; ".join(f"{count} x {reason}" for reason, count in reasons)
        return ScalingPoint(num_gpus=n, feasible=False, error=f"no feasible layout: {why}")
    best = result.plans[0]
    per_gpu = best.performance.tokens_per_s_per_gpu or 0.0
    return ScalingPoint(
        num_gpus=n,
        feasible=True,
        tokens_per_s=per_gpu * n,
        tokens_per_s_per_gpu=per_gpu,
        mfu=best.performance.mfu,
        step_time_s=best.performance.step_time_s,
        layout=best.layout,
        megatron_command=best.megatron.command,
        error=None,
    )


def scaling_curve(
    request: dict[str, Any],
    *,
    plan: PlanRunner | None = None,
    profile: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> ScalingCurve:
    """The scaling curve of ``request`` (plan fields, with a range of GPU counts).

    ``plan`` runs one plan request and returns its JSON (``PlanningBackend.plan``); the
    planner's own by default.
    """
    if plan is None:
        from app.planning.backend import default_backend

        plan = default_backend().plan
    counts = gpu_counts(request)
    if request.get("global_batch_size") is None and not request.get("global_batch_size_options"):
        # a request error, not one infeasible point per GPU count: 422 before any search
        raise SpecError(
            "global_batch_size is required: the global batch in sequences (e.g. 1024)",
            field="global_batch_size",
        )
    budget = request.get("token_budget")
    price = request.get("usd_per_gpu_hour")
    base = {
        k: v
        for k, v in request.items()
        if k not in ("num_gpus", "num_gpus_options", "top_k", "pareto")
    }
    points: list[ScalingPoint] = []
    for i, n in enumerate(counts):
        try:
            result = plan_answer(plan({**base, "num_gpus": n, "top_k": 1}, profile=profile))
        except SpecError as exc:
            if exc.field not in (None, "num_gpus", "global_batch_size"):
                raise
            points.append(ScalingPoint(num_gpus=n, feasible=False, error=exc.message))
        else:
            points.append(_point(n, result))
        if progress is not None:
            progress(i + 1, len(counts))
    feasible = [p for p in points if p.feasible]
    reference = feasible[0] if feasible else None
    for p in feasible:
        assert reference is not None and p.tokens_per_s is not None
        ref_per_gpu, ref_total = reference.tokens_per_s_per_gpu or 0.0, reference.tokens_per_s
        per_gpu = p.tokens_per_s_per_gpu or 0.0
        # scaling efficiency = (tokens/s per GPU) / (tokens/s per GPU at the smallest count)
        p.scaling_efficiency = per_gpu / ref_per_gpu if ref_per_gpu else None
        p.speedup = p.tokens_per_s / ref_total if ref_per_gpu and ref_total else None
        if budget is not None and p.tokens_per_s > 0:
            seconds = float(budget) / p.tokens_per_s  # time to train = tokens / throughput
            p.days = seconds / SECONDS_PER_DAY
            p.gpu_hours = seconds * p.num_gpus / SECONDS_PER_HOUR
            if price is not None:
                p.usd = p.gpu_hours * float(price)  # cost = GPU-hours x $/GPU-hour
    return ScalingCurve(
        model=request.get("model") if isinstance(request.get("model"), str) else None,
        gpu=request.get("gpu") if isinstance(request.get("gpu"), str) else None,
        seq_length=request.get("seq_length"),
        global_batch_size=request.get("global_batch_size"),
        token_budget=budget,
        usd_per_gpu_hour=price,
        reference_num_gpus=reference.num_gpus if reference else None,
        points=points,
    )
