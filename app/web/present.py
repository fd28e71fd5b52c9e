"""Presentation helpers shared by every template: one precision per unit, component tables,
near-duplicate grouping and the objective columns (cost, days, GPU-hours).

Every number a page shows goes through one filter here (registered in ``templating.py``), so
GiB always have one decimal and seconds two, whichever page shows them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from app.planning.reports import RankedPlan

GIB = 2**30

# Settings that change how a layout trades memory for time but not its parallel grid: a plan
# that differs from a faster one only in these is a variant of it, not a new answer.
VARIANT_KEYS = {"recompute": "recompute", "moe_a2a_overlap": "MoE all-to-all overlap"}


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def fmt_gib(value: Any, *, from_bytes: bool = False) -> str:
    """GiB with one decimal ("12.3 GiB"); ``from_bytes`` converts a byte count first."""
    number = _finite(value)
    if number is None:
        return "–"
    return f"{number / GIB if from_bytes else number:,.1f}\u00a0GiB"


def fmt_seconds(value: Any) -> str:
    """Seconds with two decimals ("14.75 s"), the one way a step time is shown."""
    number = _finite(value)
    return "–" if number is None else f"{number:,.2f}\u00a0s"


def fmt_pct(value: Any, digits: int = 0) -> str:
    """A fraction as a percentage ("54 %")."""
    number = _finite(value)
    return "–" if number is None else f"{100 * number:.{digits}f}\u00a0%"


def fmt_int(value: Any) -> str:
    """A count or a rate with thousands separators and no decimals ("11,124")."""
    number = _finite(value)
    return "–" if number is None else f"{number:,.0f}"


def fmt_usd(value: Any) -> str:
    number = _finite(value)
    return "–" if number is None else f"${number:,.0f}"


def fmt_days(value: Any) -> str:
    number = _finite(value)
    return "–" if number is None else f"{number:,.1f}\u00a0d"


FILTERS = {
    "gib": fmt_gib,
    "seconds": fmt_seconds,
    "pct": fmt_pct,
    "count": fmt_int,
    "usd": fmt_usd,
    "days": fmt_days,
}
"""Jinja2 filters: ``{{ x|gib }}``, ``{{ x|seconds }}``, ``{{ x|pct }}``, ``{{ x|count }}``."""


def component_rows(
    breakdown: Mapping[str, Any], labels: dict[str, str], scale: float, total: float | None = None
) -> list[dict[str, Any]]:
    """Non-zero components as ``{label, value, share}`` in display units (``scale`` divides the
    SI value; ``total`` is in SI units too), largest first; zeros say nothing."""
    from app.web.views import label

    values = [(label(k, labels), (_finite(v) or 0.0) / scale) for k, v in breakdown.items()]
    kept = [(name, v) for name, v in values if round(v, 2) > 0]  # what shows as 0.0 is noise
    whole = total / scale if total else sum(v for _, v in kept)
    kept.sort(key=lambda kv: -kv[1])
    return [{"label": n, "value": v, "share": v / whole if whole else 0.0} for n, v in kept]


def is_moe(plan: RankedPlan) -> bool:
    """Whether the plan's model has experts: its Megatron flags name them (dense ones do not)."""
    return "--num-experts" in plan.megatron.args


def objective_columns(plans: Sequence[RankedPlan]) -> dict[str, bool]:
    """Which objective columns have values in any plan (days and GPU-hours need a token budget,
    cost needs a price too)."""
    return {
        "days": any(_finite(p.objective.days) is not None for p in plans),
        "gpu_hours": any(_finite(p.objective.gpu_hours) is not None for p in plans),
        "usd": any(_finite(p.objective.usd) is not None for p in plans),
    }


def _grid_key(plan: RankedPlan) -> tuple[tuple[str, Any], ...]:
    layout = plan.layout.model_dump()
    return tuple(sorted((k, repr(v)) for k, v in layout.items() if k not in VARIANT_KEYS))


def group_variants(rows: list[dict[str, Any]], plans: Sequence[RankedPlan]) -> list[dict[str, Any]]:
    """Rows with their near-duplicates folded in: a slower plan whose layout differs from a
    better-ranked one only in recompute or overlap settings goes to that row's ``variants``."""
    grouped: list[dict[str, Any]] = []
    best_of: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    for row, plan in zip(rows, plans, strict=True):
        key = _grid_key(plan)
        head = best_of.get(key)
        if head is not None and row["step_time_s"] >= head["step_time_s"]:
            head["variants"].append(row | {"differs": _difference(head["plan"], plan)})
            continue
        entry = row | {"variants": [], "plan": plan}
        best_of.setdefault(key, entry)
        grouped.append(entry)
    return grouped


def _word(value: Any) -> str:
    return {True: "on", False: "off", None: "none"}.get(value, str(value))


def _difference(best: RankedPlan, other: RankedPlan) -> str:
    """What a variant changes, in words: "recompute selective (best: none)"."""
    a, b = best.layout.model_dump(), other.layout.model_dump()
    parts = []
    for key, name in VARIANT_KEYS.items():
        if a[key] != b[key]:
            parts.append(f"{name} {_word(b[key])} (best: {_word(a[key])})")
    return "; ".join(parts) or "same layout"
