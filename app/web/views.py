"""Turn plan results (``app.planning.plan_request``'s JSON) into what the templates show.

SI units come in; GiB, TFLOP/s and percentages appear only here, at rendering.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from app.core.units import GIB
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


def layout_text(layout: dict[str, Any], *, moe: bool = True) -> str:
    """A compact one-line layout: 'TP8 PP4 VPP2 DP8 EP8 mbs1'; no EP/ETP for a dense model."""
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
        value = layout.get(key)
        if value is None or (key in ("vpp", "cp", "ep", "etp") and value in (1, None)):
            continue
        if not moe and key in ("ep", "etp"):
            continue
        parts.append(f"{name}{value}")
    parts.append(f"mbs{layout.get('micro_batch_size', 1)}")
    return " ".join(parts)


def shares(plan: dict[str, Any]) -> tuple[float, float]:
    """(bubble share, exposed communication share) of the step time."""
    perf = plan.get("performance", {})
    given = perf.get("shares") or {}
    step = _num(perf.get("step_time_s"))
    breakdown = perf.get("breakdown") or {}
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


def plan_row(rank: int, plan: dict[str, Any]) -> dict[str, Any]:
    layout = plan.get("layout", {})
    memory = plan.get("memory", {})
    perf = plan.get("performance", {})
    capacity = _num(memory.get("capacity_bytes"))
    total = _num(memory.get("total_bytes"))
    threshold = _num(memory.get("threshold"), 0.8)
    bubble, comm = shares(plan)
    return {
        "rank": rank,
        "layout": layout_text(layout, moe=is_moe(plan)),
        "moe": is_moe(plan),
        "objective": plan.get("objective") or {},
        "recompute": layout.get("recompute", "none"),
        "sharding": layout.get("optimizer_sharding", "none"),
        "tokens_per_s_per_gpu": _num(perf.get("tokens_per_s_per_gpu")),
        "mfu": _num(perf.get("mfu")),
        "step_time_s": _num(perf.get("step_time_s")),
        "memory_gib": total / GIB,
        "capacity_gib": capacity / GIB,
        "used_fraction": total / capacity if capacity else 0.0,
        "threshold": threshold,
        "fits": bool(memory.get("fits", True)),
        "bubble_share": bubble,
        "comm_share": comm,
    }


def _largest_first(parts: dict[str, Any]) -> dict[str, Any]:
    """Non-zero parts (zeros would crowd the legend) in the tables' order, largest first."""
    return dict(sorted(parts.items(), key=lambda kv: -_num(kv[1])))


def memory_chart(plan: dict[str, Any]) -> dict[str, Any]:
    memory = plan.get("memory", {})
    breakdown = memory.get("breakdown") or {}
    capacity = _num(memory.get("capacity_bytes"))
    threshold = _num(memory.get("threshold"), 0.8)
    limit = _num(memory.get("limit_bytes"), threshold * capacity)
    shown = _largest_first({k: v for k, v in breakdown.items() if round(_num(v) / GIB, 1) > 0})
    total = _num(memory.get("total_bytes"), sum(_num(v) for v in shown.values()))
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


def time_chart(plan: dict[str, Any]) -> dict[str, Any]:
    perf = plan.get("performance", {})
    breakdown = perf.get("breakdown") or {}
    shown = _largest_first({k: v for k, v in breakdown.items() if round(_num(v), 2) > 0})
    return {
        "kind": "time",
        "labels": [label(k, TIME_LABELS) for k in shown],
        "values": [round(_num(v), 2) for v in shown.values()],
        "total": round(_num(perf.get("step_time_s")), 2),
    }


def component_tables(plan: dict[str, Any]) -> dict[str, Any]:
    """Memory and time per component as table rows (values visible, not hover-only)."""
    memory = plan.get("memory", {})
    perf = plan.get("performance", {})
    stages = [
        (name, _num(memory.get(f"{name}_stage_bytes")) / GIB)
        for name in ("first", "last")
        if memory.get(f"{name}_stage_bytes") is not None
    ]
    return {
        "memory_rows": component_rows(
            memory.get("breakdown") or {}, MEMORY_LABELS, GIB, _num(memory.get("total_bytes"))
        ),
        "time_rows": component_rows(
            perf.get("breakdown") or {}, TIME_LABELS, 1.0, _num(perf.get("step_time_s"))
        ),
        "stages": stages,
    }


def _part(item: dict[str, Any], key: str) -> dict[str, Any]:
    """``item[key]`` when it is a nested dict, else ``item`` itself (flat records)."""
    value = item.get(key)
    return value if isinstance(value, dict) else item


def _point(item: dict[str, Any]) -> dict[str, Any] | None:
    """One scatter point from a plan, a Pareto entry or an evaluated-layout record."""
    memory = _part(item, "memory")
    perf = _part(item, "performance")
    total = memory.get("total_bytes", memory.get("memory_bytes"))
    speed = perf.get("tokens_per_s_per_gpu")
    if total is None or speed is None:
        return None
    layout = _part(item, "layout")
    return {
        "x": round(_num(total) / GIB, 3),
        "y": round(_num(speed), 1),
        "fits": bool(memory.get("fits", True)),
        "label": layout_text(layout, moe=is_moe(item))
        if "megatron" in item
        else layout_text(layout),
    }


def scatter_chart(result: dict[str, Any]) -> dict[str, Any]:
    """Throughput against memory for every layout the result describes.

    Uses ``evaluated`` when the search returns it, else the Pareto front and the plans.
    """
    sources: Iterable[Any]
    evaluated = result.get("evaluated")
    if isinstance(evaluated, list) and evaluated:
        sources, basis = evaluated, "evaluated"
    else:
        pareto = result.get("pareto") or []
        if isinstance(pareto, dict):
            pareto = pareto.get("points") or pareto.get("plans") or []
        sources, basis = list(pareto) + list(result.get("plans") or []), "pareto"
    points = [p for p in (_point(s) for s in sources if isinstance(s, dict)) if p is not None]
    plans = result.get("plans") or []
    limit = None
    if plans:
        memory = plans[0].get("memory", {})
        cap = _num(memory.get("capacity_bytes"))
        limit = round(
            _num(memory.get("limit_bytes"), _num(memory.get("threshold"), 0.8) * cap) / GIB, 3
        )
    over = sum(1 for p in points if not p["fits"])
    return {"kind": "scatter", "points": points, "limit": limit, "basis": basis, "over": over}
