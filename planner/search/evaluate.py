"""Evaluate given layouts: Megatron's rules, memory, performance and launch flags, as JSON.

This is what ``planner evaluate`` and ``POST /v1/evaluations`` return. All layouts that share a
model, cluster and job are evaluated as one vectorised batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from planner.layouts import LayoutBatch
from planner.megatron.flags import launch_spec
from planner.memory.estimate import MemoryEstimate, MemoryOptions, estimate_memory
from planner.performance.step_time import (
    PerformanceEstimate,
    PerformanceProfile,
    estimate_performance,
)
from planner.search.cp_choice import choose_open_cp_comm
from planner.space import comm_flags
from planner.space.rules import RULES, check_rules, violations
from planner.space.version_rules import pin_unavailable
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob


def _num(value: Any) -> float | int | None:
    """A JSON-safe number: ints stay ints, NaN/inf become None."""
    if isinstance(value, np.integer | int):
        return int(value)
    f = float(value)
    if not math.isfinite(f):
        return None
    return f


def memory_json(mem: MemoryEstimate, i: int) -> dict[str, Any]:
    """The memory part of one layout's result."""
    total = float(mem.total_bytes[i])
    capacity = float(mem.capacity_bytes)
    return {
        "total_bytes": _num(total),
        "capacity_bytes": _num(capacity),
        "threshold": mem.threshold,
        "limit_bytes": _num(mem.threshold * capacity),
        "fits": bool(mem.fits[i]),
        "utilization": _num(total / capacity),
        "headroom_bytes": _num(mem.threshold * capacity - total),
        "worst_stage": _worst_stage(mem, i),
        "first_stage_bytes": _num(mem.first_stage_bytes[i]),
        "last_stage_bytes": _num(mem.last_stage_bytes[i]),
        "breakdown": {name: _num(values[i]) for name, values in mem.terms.items()},
        "worst_rank": None if mem.worst_rank is None else int(mem.worst_rank[i]),
        "host_bytes": None if mem.host_bytes is None else _num(mem.host_bytes[i]),
        "host_fits": None if mem.host_fits is None else bool(mem.host_fits[i]),
        **_stage_bytes(mem, i),
    }


def _worst_stage(mem: MemoryEstimate, i: int) -> str:
    """Where the most loaded rank sits, "first", "last" or "middle": a pipeline_layout charges
    every rank, so it can sit between the ends (worst_rank says which; worst_stage is 0)."""
    if int(mem.worst_stage[i]) == 1:
        return "last"
    if mem.worst_rank is None or int(mem.worst_rank[i]) == 0:
        return "first"
    return "middle"


def _stage_bytes(mem: MemoryEstimate, i: int) -> dict[str, Any]:
    """``{"stage_bytes": [rank 0, rank 1, ...]}`` when every rank was charged (a pipeline
    layout), else nothing (the first and the last stage are above)."""
    if mem.rank_bytes is None or np.isnan(mem.rank_bytes[0, i]):
        return {}
    column = mem.rank_bytes[:, i]
    return {"stage_bytes": [_num(v) for v in column[~np.isnan(column)]]}


def performance_json(perf: PerformanceEstimate, i: int) -> dict[str, Any]:
    """The performance part of one layout's result."""
    step = float(perf.step_time_s[i])
    breakdown = {name: _num(values[i]) for name, values in perf.breakdown.items()}
    shares = {
        name.removesuffix("_s") + "_share": _num(float(values[i]) / step) if step > 0 else None
        for name, values in perf.breakdown.items()
    }
    return {
        "step_time_s": _num(step),
        "tokens_per_s_per_gpu": _num(perf.tokens_per_s_per_gpu[i]),
        "model_tflops_per_gpu": _num(perf.model_tflops_per_gpu[i]),
        "mfu": _num(perf.mfu[i]),
        "breakdown": breakdown,
        "shares": shares,
    }


def evaluate_layouts(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    layouts: Sequence[Layout],
    profile: PerformanceProfile,
    *,
    threshold: float = 0.8,
) -> list[dict[str, Any]]:
    """Evaluate layouts of one model, cluster and job in one vectorised pass.

    Every result has ``valid`` and ``violations`` (Megatron's rules), ``memory`` (the 80 % rule)
    and, for valid layouts, ``performance`` and ``megatron`` (argv, torchrun command, env).
    """
    if not layouts:
        return []
    batch = pin_unavailable(job, LayoutBatch.from_layouts(layouts))  # None = on where it exists
    violated = check_rules(model, cluster, job, batch)
    valid = np.asarray(~violated.any(axis=1), dtype=np.bool_)
    options = MemoryOptions(threshold=threshold)
    # an open --cp-comm-type is the planner's choice, as in the search (planner.search.cp_choice)
    batch = choose_open_cp_comm(model, cluster, job, batch, valid, options)
    mem = estimate_memory(model, cluster, job, batch, options)
    perf: PerformanceEstimate | None = None
    if valid.any():
        perf = estimate_performance(model, cluster, job, batch, profile)
    results: list[dict[str, Any]] = []
    for i in range(len(batch)):
        layout = batch.layout(i)
        ok = bool(valid[i])
        messages = violations(model, cluster, job, layout) if not ok else []
        if not ok and not messages:  # the vectorised check knows more than the messages say
            messages = [RULES[j].summary for j in np.flatnonzero(violated[i])]
        result: dict[str, Any] = {
            "valid": ok,
            "violations": messages,
            "layout": comm_flags.resolve(
                model, cluster, layout, tp_overlap_on=job.tp_comm_overlap
            ).to_dict(),
            "memory": memory_json(mem, i),
            "performance": None,
            "megatron": None,
        }
        if ok and perf is not None:
            result["performance"] = performance_json(perf, i)
            launch = launch_spec(model, cluster, job, layout)
            result["megatron"] = {
                "args": launch.args,
                "command": launch.command,
                "env": launch.env,
                "notes": list(launch.notes),
            }
        results.append(result)
    return results
