"""Fan-out of a large plan job over the workers: one queued part per (GPU count x batch size).

The worker that claims the parent inserts its parts (once: a re-run after a crash finds them),
then runs parts itself while others claim the rest, and merges the finished parts into the
parent's result: the best ``top_k`` plans over all parts, summed search statistics and rejection
counts, and a list of the parts. A parent therefore never waits on a part nobody runs, and a
part whose worker died is re-queued like any job.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.planning.models import PlanJobRow
from app.planning.repository import PlanJobRepository
from app.planning.schemas import FINISHED
from app.planning.service import request_hash
from planner.specs import SpecError

SUMMED_STATS = ("enumerated", "valid", "feasible", "evaluated", "trials", "scenarios")


def _values(request: dict[str, Any], many: str, one: str) -> list[int]:
    value = request.get(many)
    if value is None:
        value = request.get(one)
    if value is None:
        return []
    if isinstance(value, str):
        from app.planning.convert import int_list

        return int_list(value, many, maximum=1 << 24)
    items = value if isinstance(value, list | tuple) else [value]
    return sorted({int(v) for v in items})


def split_request(request: dict[str, Any], min_scenarios: int) -> list[dict[str, Any]] | None:
    """The parts of a plan request over ranges, or None when it is not worth splitting."""
    if min_scenarios <= 0:
        return None
    gpus = _values(request, "num_gpus_options", "num_gpus")
    batches = _values(request, "global_batch_size_options", "global_batch_size")
    if len(gpus) * len(batches) < max(2, min_scenarios):
        return None
    base = {
        k: v
        for k, v in request.items()
        if k not in ("num_gpus_options", "global_batch_size_options", "pareto")
    }
    return [
        {**base, "num_gpus": n, "global_batch_size": b, "top_k": int(request.get("top_k") or 10)}
        for n in gpus
        for b in batches
    ]


def ensure_parts(session: Session, parent: PlanJobRow, parts: list[dict[str, Any]]) -> int:
    """Queue the parts of ``parent`` unless a previous run already did; returns how many exist."""
    repo = PlanJobRepository(session)
    existing = repo.children(parent.id)
    if existing:
        return len(existing)
    now = utcnow()
    for i, part in enumerate(parts):
        resolved = {**parent.resolved, "planner_request": part}
        session.add(
            PlanJobRow(
                id=str(uuid.uuid4()),
                status="queued",
                request_hash=request_hash(part),
                request={k: v for k, v in part.items() if not isinstance(v, dict)},
                resolved=resolved,
                parent_id=parent.id,
                batch_index=i,
                created_at=now,
            )
        )
    session.flush()
    return len(parts)


def _sort_key(plan: dict[str, Any], direction: str) -> float:
    objective = plan.get("objective") or {}
    value = objective.get("value")
    if value is None:
        value = (plan.get("performance") or {}).get("tokens_per_s_per_gpu")
    if value is None:
        return float("inf")
    return -float(value) if direction == "maximize" else float(value)


def merge_parts(children: list[PlanJobRow], top_k: int) -> dict[str, Any]:
    """The parent's result from its finished parts (SpecError when none succeeded)."""
    done = [c for c in children if c.status == "succeeded" and c.result is not None]
    if not done:
        errors = "; ".join(sorted({c.error or c.status for c in children}))[:2000]
        raise SpecError(f"every part of the search failed: {errors}")
    plans: list[dict[str, Any]] = []
    direction = "maximize"
    stats: dict[str, Any] = dict.fromkeys(SUMMED_STATS, 0)
    rejections: dict[str, int] = {}
    proven = True
    for child in done:
        result = child.result or {}
        plans.extend(result.get("plans", []))
        search = result.get("search", {})
        for name in SUMMED_STATS:
            stats[name] += int(search.get(name) or 0)
        proven = proven and bool(search.get("proven_optimal"))
        for reason, n in result.get("rejections", {}).items():
            rejections[reason] = rejections.get(reason, 0) + int(n)
    for found in plans:
        direction = (found.get("objective") or {}).get("direction", direction)
        break
    plans.sort(key=lambda p: _sort_key(p, direction))
    merged = [{**p, "rank": i + 1} if "rank" in p else p for i, p in enumerate(plans[:top_k])]
    first = done[0].result or {}
    out: dict[str, Any] = {
        "plans": merged,
        "search": {
            **stats,
            "method": "fan-out",
            "proven_optimal": proven and len(done) == len(children),
            "parts": len(children),
            "parts_succeeded": len(done),
        },
        "funnel": _funnel(stats, len(merged)),
        "rejections": rejections,
        "pareto": [],
        "parts": [
            {
                "id": c.id,
                "num_gpus": c.request.get("num_gpus"),
                "global_batch_size": c.request.get("global_batch_size"),
                "status": c.status,
                "error": c.error,
            }
            for c in children
        ],
    }
    for key in ("model", "gpu"):
        if key in first:
            out[key] = first[key]
    merged_json: dict[str, Any] = json.loads(json.dumps(out, default=str))
    return merged_json


def _funnel(stats: dict[str, Any], ranked: int) -> dict[str, Any] | None:
    """The parts' summed funnel (None where a part's counts do not add up to one)."""
    from planner.search.funnel import Funnel  # planner.search loads optuna: lazily

    try:
        return Funnel.of(stats, ranked).to_dict()
    except ValueError:
        return None


def all_finished(children: list[PlanJobRow]) -> bool:
    return all(c.status in FINISHED for c in children)
