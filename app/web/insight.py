"""What the result pages say beyond the table: the search funnel, why #1 wins, what would fit
when nothing does, every pipeline stage's memory and the prediction interval.

Each reads a block the planner put in the result (``funnel``, ``winner``, ``infeasible``,
``memory.stage_bytes``, ``performance.*_interval``), so the page says what the API and the CLI
say; SI units in, GiB and percentages out.
"""

from __future__ import annotations

from typing import Any

from app.core.units import GIB
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


def funnel_steps(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The funnel's steps ``{key, label, count}``; empty for results without one (inverse
    questions answer with probes instead)."""
    funnel = result.get("funnel") or {}
    return [s for s in funnel.get("steps") or [] if isinstance(s, dict)]


def _threshold(result: dict[str, Any], request: dict[str, Any]) -> float:
    plans = result.get("plans") or []
    if plans:
        value = _finite((plans[0].get("memory") or {}).get("threshold"))
        if value is not None:
            return value
    return _finite(request.get("memory_threshold")) or 0.8


def rejection_rows(result: dict[str, Any], request: dict[str, Any]) -> list[dict[str, Any]]:
    """Each rejection reason with its count and a plain-words fix, most common first."""
    given = {f["reason"]: f["fix"] for f in (result.get("infeasible") or {}).get("fixes", [])}
    memory = memory_reason(_threshold(result, request))
    reasons = result.get("rejections") or {}
    pairs = sorted(((str(r), int(n)) for r, n in reasons.items()), key=lambda kv: -kv[1])
    return [{"reason": r, "count": n, "fix": given.get(r) or fix_for(r, memory)} for r, n in pairs]


def change_request(request: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """The stored request with one suggested change applied (ranges dropped where it fixes
    the GPU count or the sequence)."""
    patch = {k: v for k, v in (change.get("request") or {}).items() if k in CHANGE_FIELDS}
    out = dict(request) | patch
    if "num_gpus" in patch:
        out.pop("num_gpus_options", None)
    return out


def infeasible_view(result: dict[str, Any]) -> dict[str, Any] | None:
    """The infeasible block as the page shows it (None when the result has plans)."""
    block = result.get("infeasible")
    if not isinstance(block, dict):
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


def stage_rows(plan: dict[str, Any]) -> list[tuple[str, float]]:
    """(stage name, GiB) of every pipeline stage when the planner charged each (a pipeline
    layout); else the first and the last stage."""
    memory = plan.get("memory") or {}
    every = memory.get("stage_bytes")
    if isinstance(every, list) and every:
        return [(f"stage {i}", (_finite(v) or 0.0) / GIB) for i, v in enumerate(every)]
    return [
        (name, (_finite(memory.get(f"{name}_stage_bytes")) or 0.0) / GIB)
        for name in ("first", "last")
        if memory.get(f"{name}_stage_bytes") is not None
    ]


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 2:
        low, high = _finite(value[0]), _finite(value[1])
        if low is not None and high is not None:
            return low, high
    return None


def prediction(plan: dict[str, Any]) -> dict[str, Any]:
    """The prediction interval and the extrapolation reasons, where the result has them."""
    perf = plan.get("performance") or {}
    reasons = perf.get("extrapolation") or []
    return {
        "tokens": _pair(perf.get("tokens_per_s_per_gpu_interval")),
        "step": _pair(perf.get("step_time_interval_s")),
        "extrapolation": [str(r) for r in reasons] if isinstance(reasons, list) else [],
    }


def add_infeasible_points(scatter: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The scatter chart with the nearest layouts that do not fit as hollow points, and the
    memory limit line taken from them when no plan gives it."""
    block = result.get("infeasible") or {}
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
