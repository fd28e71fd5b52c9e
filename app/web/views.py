"""Turn typed plan results (:mod:`app.planning.reports`) into what the templates show.

SI units come in; GiB, TFLOP/s and percentages appear only here, at rendering. Every read is an
attribute of a typed report, so a renamed field fails mypy instead of leaving a cell empty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from app.core.units import GIB
from app.planning.reports import LayoutRead, PerformanceRead, PlanAnswer, PlanResult, RankedPlan
from app.web.launch import launch_command as launch_command  # re-exported for the routes
from app.web.launch import launch_script as launch_script
from app.web.present import component_rows, is_moe

MEMORY_LABELS = {
    "weights_bytes": "Weights",
    "gradients_bytes": "Gradients",
    "optimizer_bytes": "Optimizer state",
    "activations_bytes": "Activations",
    "logits_bytes": "Logits",
    "comm_buffers_bytes": "Comm. buffers",
    "fp8_bytes": "FP8 weight copies",
    "embedding_input_bytes": "Embedding input",
    "workspace_bytes": "Kernel workspace",
    "fragmentation_bytes": "Allocator fragmentation",
    "runtime_overhead_bytes": "CUDA/NCCL runtime",
}
TIME_LABELS = {
    "compute_s": "Compute",
    "recompute_s": "Recompute",
    "overhead_s": "Launch overhead",
    "tp_comm_s": "TP comm.",
    "cp_comm_s": "CP comm.",
    "ep_comm_s": "EP comm.",
    "pp_comm_s": "PP comm.",
    "dp_comm_s": "DP comm.",
    "bubble_s": "Pipeline bubble",
    "optimizer_s": "Optimizer step",
    "straggler_s": "Slowest-GPU wait",
}


def label(key: str, table: dict[str, str]) -> str:
    if key in table:
        return table[key]
    stem = key.removesuffix("_bytes").removesuffix("_s")
    return stem.replace("_", " ").capitalize()


def _num(value: Any, default: float = 0.0) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def layout_text(layout: LayoutRead | Mapping[str, Any], *, moe: bool = True) -> str:
    """A compact one-line layout: 'TP8 PP4 VPP2 DP8 EP8 mbs1'; no EP/ETP for a dense model.

    A plan's typed layout, or the plain layouts of an infeasible answer's nearest ones."""
    fields = layout.model_dump() if isinstance(layout, LayoutRead) else layout
    parts = []
    for key, name in (
        ("tp", "TP"),
        ("pp", "PP"),
        ("vpp", "VPP"),
        ("cp", "CP"),
        ("ep", "EP"),
        ("etp", "ETP"),
        ("dp", "DP"),
    ):
        value = fields.get(key)
        if value is None or (key in ("vpp", "cp", "ep", "etp") and value in (1, None)):
            continue
        if not moe and key in ("ep", "etp"):
            continue
        parts.append(f"{name}{value}")
    parts.append(f"mbs{fields.get('micro_batch_size', 1)}")
    return " ".join(parts)


def shares(perf: PerformanceRead) -> tuple[float, float]:
    """(bubble share, exposed communication share) of the step time."""
    given = perf.shares
    step = _num(perf.step_time_s)
    breakdown = perf.breakdown
    if "bubble_share" in given:
        bubble = _num(given["bubble_share"])
    else:
        bubble = _num(breakdown.get("bubble_s")) / step if step else 0.0
    comm_shares = [k for k in given if k.endswith("_comm_share")]
    if comm_shares:
        comm = sum(_num(given[k]) for k in comm_shares)
    else:
        comm_keys = [k for k in breakdown if k.endswith("_comm_s")]
        comm = sum(_num(breakdown[k]) for k in comm_keys) / step if step else 0.0
    return bubble, comm


def plan_row(rank: int, plan: RankedPlan) -> dict[str, Any]:
    layout, memory, perf = plan.layout, plan.memory, plan.performance
    capacity = _num(memory.capacity_bytes)
    total = _num(memory.total_bytes)
    bubble, comm = shares(perf)
    return {
        "rank": rank,
        "layout": layout_text(layout, moe=is_moe(plan)),
        "moe": is_moe(plan),
        "objective": plan.objective,
        "recompute": layout.recompute,
        "sharding": layout.optimizer_sharding,
        "tokens_per_s_per_gpu": _num(perf.tokens_per_s_per_gpu),
        "mfu": _num(perf.mfu),
        "step_time_s": _num(perf.step_time_s),
        "memory_gib": total / GIB,
        "capacity_gib": capacity / GIB,
        "used_fraction": total / capacity if capacity else 0.0,
        "threshold": memory.threshold,
        "fits": memory.fits,
        "bubble_share": bubble,
        "comm_share": comm,
    }


def result_head(result: PlanAnswer) -> dict[str, Any]:
    """What the results' heading says: the model and GPU, the inverse question's answer, how
    long the search took, whether it proved the optimum, and why #1 wins."""
    if isinstance(result, PlanResult):
        return {
            "model": result.model,
            "gpu": result.gpu,
            "question": None,
            "value": None,
            "elapsed_s": result.search.elapsed_s,
            "proven_optimal": result.search.proven_optimal,
            "winner": (result.winner or {}).get("sentence"),
            # the stack settings the request left open (planner.search.stack_choice)
            "chosen": (result.funnel or {}).get("choices_sentence"),
        }
    return {
        "model": result.model,
        "gpu": result.gpu,
        "question": result.question,
        "value": result.value,
        "elapsed_s": None,
        "proven_optimal": None,
        "winner": None,
        "chosen": None,
    }


def _largest_first(parts: Mapping[str, Any]) -> dict[str, Any]:
    """Non-zero parts (zeros would crowd the legend) in the tables' order, largest first."""
    return dict(sorted(parts.items(), key=lambda kv: -_num(kv[1])))


def memory_chart(plan: RankedPlan) -> dict[str, Any]:
    memory = plan.memory
    capacity = _num(memory.capacity_bytes)
    threshold = memory.threshold
    limit = _num(memory.limit_bytes, threshold * capacity)
    shown = _largest_first(
        {k: v for k, v in memory.breakdown.items() if round(_num(v) / GIB, 1) > 0}
    )
    total = _num(memory.total_bytes, sum(_num(v) for v in shown.values()))
    return {
        "kind": "memory",
        "labels": [label(k, MEMORY_LABELS) for k in shown],
        "values": [round(_num(v) / GIB, 1) for v in shown.values()],
        "limit": round(limit / GIB, 1),
        "limit_label": f"{threshold:.0%} of HBM",
        "capacity": round(capacity / GIB, 1),
        # the axis reaches past the limit and the stack (to the next 10 GiB), so the marker
        # is always inside it
        "axis_max": 10 * math.ceil(max(capacity, limit, total) / GIB / 10),
    }


def time_chart(plan: RankedPlan) -> dict[str, Any]:
    perf = plan.performance
    shown = _largest_first({k: v for k, v in perf.breakdown.items() if round(_num(v), 2) > 0})
    return {
        "kind": "time",
        "labels": [label(k, TIME_LABELS) for k in shown],
        "values": [round(_num(v), 2) for v in shown.values()],
        "total": round(_num(perf.step_time_s), 2),
    }


def component_tables(plan: RankedPlan) -> dict[str, Any]:
    """Memory and time per component as table rows (values visible, not hover-only)."""
    memory, perf = plan.memory, plan.performance
    ends = (("first", memory.first_stage_bytes), ("last", memory.last_stage_bytes))
    return {
        "memory_rows": component_rows(
            memory.breakdown, MEMORY_LABELS, GIB, _num(memory.total_bytes)
        ),
        "time_rows": component_rows(perf.breakdown, TIME_LABELS, 1.0, _num(perf.step_time_s)),
        "stages": [(name, _num(value) / GIB) for name, value in ends if value is not None],
    }


def _point(plan: RankedPlan) -> dict[str, Any] | None:
    """One scatter point from a plan or a Pareto entry (None without memory or throughput)."""
    total, speed = plan.memory.total_bytes, plan.performance.tokens_per_s_per_gpu
    if total is None or speed is None:
        return None
    return {
        "x": round(total / GIB, 3),
        "y": round(speed, 1),
        "fits": plan.memory.fits,
        "label": layout_text(plan.layout, moe=is_moe(plan)),
    }


def scatter_chart(result: PlanAnswer) -> dict[str, Any]:
    """Throughput against memory for the Pareto front and the plans of a result."""
    pareto: list[RankedPlan] = list(result.pareto) if isinstance(result, PlanResult) else []
    sources = pareto + list(result.plans)
    points = [p for p in (_point(s) for s in sources) if p is not None]
    limit = None
    if result.plans:
        memory = result.plans[0].memory
        cap = _num(memory.capacity_bytes)
        limit = round(_num(memory.limit_bytes, memory.threshold * cap) / GIB, 3)
    over = sum(1 for p in points if not p["fits"])
    return {"kind": "scatter", "points": points, "limit": limit, "basis": "pareto", "over": over}
