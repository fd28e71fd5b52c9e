"""What the result pages say beyond the table: the search funnel, why #1 wins, what would fit
when nothing does, every pipeline stage's memory and the prediction interval.

Each reads a block the planner put in the result (``funnel``, ``winner``, ``infeasible``,
``memory.stage_bytes``, ``performance.*_interval``), so the page says what the API and the CLI
say; SI units in, GiB and percentages out.
"""

from __future__ import annotations

from typing import Any

from app.core.units import GIB
from app.planning.reports import PlanAnswer, PlanResult, RankedPlan
from app.web.present import _finite
from app.web.views import layout_text
from planner.search.fixes import fix_for
from planner.search.screening import memory_reason

CHANGE_FIELDS = (
    "num_gpus",
    "seq_length",
    "recompute",
    "optimizer_sharding",
    "optimizer_offload_fraction",
)
"""The request fields an infeasible answer's changes may set (and nothing else)."""


def infeasible_block(result: PlanAnswer | None) -> dict[str, Any] | None:
    """What would fit when nothing does (a search's block; inverse answers have none)."""
    return result.infeasible if isinstance(result, PlanResult) else None


def funnel_steps(result: PlanAnswer) -> list[dict[str, Any]]:
    """The funnel's steps ``{key, label, count}``; empty for results without one (inverse
    questions answer with probes instead)."""
    funnel = (result.funnel if isinstance(result, PlanResult) else None) or {}
    return [s for s in funnel.get("steps") or [] if isinstance(s, dict)]


def _threshold(result: PlanAnswer, request: dict[str, Any]) -> float:
    if result.plans:
        return result.plans[0].memory.threshold
    return _finite(request.get("memory_threshold")) or 0.8


def rejection_rows(result: PlanAnswer, request: dict[str, Any]) -> list[dict[str, Any]]:
    """Each rejection reason with its count and a plain-words fix, most common first."""
    given = {f["reason"]: f["fix"] for f in (infeasible_block(result) or {}).get("fixes", [])}
    memory = memory_reason(_threshold(result, request))
    pairs = sorted(((r, n) for r, n in result.rejections.items()), key=lambda kv: -kv[1])
    return [{"reason": r, "count": n, "fix": given.get(r) or fix_for(r, memory)} for r, n in pairs]


def change_request(request: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """The stored request with one suggested change applied (ranges dropped where it fixes
    the GPU count or the sequence)."""
    patch = {k: v for k, v in (change.get("request") or {}).items() if k in CHANGE_FIELDS}
    out = dict(request) | patch
    if "num_gpus" in patch:
        out.pop("num_gpus_options", None)
    return out


def infeasible_view(result: PlanAnswer) -> dict[str, Any] | None:
    """The infeasible block as the page shows it (None when the result has plans)."""
    block = infeasible_block(result)
    if block is None:
        return None
    moe = bool(block.get("moe"))
    nearest = [
        {
            "layout": layout_text(n.get("layout") or {}, moe=moe),
            "recompute": (n.get("layout") or {}).get("recompute", "none"),
            "sharding": (n.get("layout") or {}).get("optimizer_sharding", "none"),
            "total_gib": (_finite(n.get("total_bytes")) or 0.0) / GIB,
            "over_gib": (_finite(n.get("over_bytes")) or 0.0) / GIB,
            "over_fraction": _finite(n.get("over_fraction")) or 0.0,
        }
        for n in block.get("nearest") or []
    ]
    changes = [
        {"index": i, "description": c.get("description", ""), "kind": c.get("kind", "")}
        for i, c in enumerate(block.get("changes") or [])
    ]
    return {
        "fewest_gpus": block.get("fewest_gpus"),
        "num_gpus": block.get("num_gpus"),
        "max_gpus_tried": block.get("max_gpus_tried"),
        "changes": changes,
        "nearest": nearest,
        "limit_gib": (_finite((block.get("nearest") or [{}])[0].get("limit_bytes")) or 0) / GIB,
    }


def stage_rows(plan: RankedPlan) -> list[tuple[str, float]]:
    """(stage name, GiB) of every pipeline stage when the planner charged each (a pipeline
    layout); else the first and the last stage."""
    memory = plan.memory
    if memory.stage_bytes:
        return [(f"stage {i}", (_finite(v) or 0.0) / GIB) for i, v in enumerate(memory.stage_bytes)]
    ends = (("first", memory.first_stage_bytes), ("last", memory.last_stage_bytes))
    return [(name, (_finite(v) or 0.0) / GIB) for name, v in ends if v is not None]


def worst_stage_title(plan: RankedPlan) -> str:
    """Where the most loaded GPU sits, for the memory heading: the first or the last stage, or
    "pipeline rank r of p" when a pipeline_layout makes a middle rank the heaviest."""
    memory = plan.memory
    if memory.worst_stage == "middle" and memory.worst_rank is not None:
        return f"pipeline rank {memory.worst_rank} of {plan.layout.pp}"
    return f"{memory.worst_stage} stage"


def _pair(value: list[float] | None) -> tuple[float, float] | None:
    if value is not None and len(value) == 2:
        low, high = _finite(value[0]), _finite(value[1])
        if low is not None and high is not None:
            return low, high
    return None


def prediction(plan: RankedPlan) -> dict[str, Any]:
    """The prediction interval and the extrapolation reasons, where the result has them."""
    perf = plan.performance
    band = perf.interval or {}
    return {
        "tokens": _pair(perf.tokens_per_s_per_gpu_interval),
        "step": _pair(perf.step_time_interval_s),
        "extrapolation": list(perf.extrapolation or []),
        # whose errors the band is: the layout's regime, or the parent it fell back to (and why)
        "regime": band.get("regime"),
        "fallback": band.get("fallback"),
        # the band's rule in words (widened for a never-calibrated campaign, or narrowed by the
        # cluster's calibrated level)
        "rule": band.get("band"),
    }


def add_infeasible_points(scatter: dict[str, Any], result: PlanAnswer) -> dict[str, Any]:
    """The scatter chart with the nearest layouts that do not fit as hollow points, and the
    memory limit line taken from them when no plan gives it."""
    block = infeasible_block(result) or {}
    moe = bool(block.get("moe"))
    extra = [
        {
            "x": round((_finite(n.get("total_bytes")) or 0.0) / GIB, 3),
            "y": round(_finite(n.get("tokens_per_s_per_gpu")) or 0.0, 1),
            "fits": False,
            "label": layout_text(n.get("layout") or {}, moe=moe),
        }
        for n in block.get("nearest") or []
        if _finite(n.get("tokens_per_s_per_gpu")) is not None
    ]
    if not extra:
        return scatter
    limit = scatter.get("limit")
    if limit is None:
        limit = round((_finite(block["nearest"][0].get("limit_bytes")) or 0.0) / GIB, 3)
    points = list(scatter.get("points") or []) + extra
    over = sum(1 for p in points if not p["fits"])
    return scatter | {"points": points, "limit": limit, "over": over}
