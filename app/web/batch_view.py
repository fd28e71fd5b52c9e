"""What the batch page shows of a batch: its progress, and per job its status in words and the
best plan's layout, tokens/s per GPU with its prediction interval, and memory.

The cells are the plan table's own (:func:`app.web.views.plan_row`,
:func:`app.web.insight.prediction`), read from each job's stored result. A finished job's
summary never changes, so it is read once and kept (per app, bounded) while the page polls.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.planning.schemas import FINISHED
from app.web import insight, views
from app.web.backend import read_result

if TYPE_CHECKING:
    from app.planning.models import PlanJobRow

STATUS_WORDS = {
    "queued": "queued",
    "running": "running",
    "succeeded": "done",
    "failed": "failed",
    "cancelled": "cancelled",
}
"""A plan job's stored status as the batch page words it."""
CACHE_SIZE = 5000
"""Finished jobs' summaries kept per app (a batch holds at most 2000 jobs)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Best:
    """A finished job's outcome: its best plan's cells, or why there is none."""

    row: dict[str, Any] | None = None
    """``views.plan_row`` of plan 1 (layout, tokens/s per GPU, memory); None without a plan."""
    interval: tuple[float, float] | None = None
    """The 80 % prediction interval of tokens/s per GPU, where the result has one."""
    reason: str | None = None
    """Why the job has no plan: the failure, or what made every layout infeasible."""


@dataclass(frozen=True, kw_only=True, slots=True)
class JobLine:
    """One job of a batch as a row of the page's table."""

    number: int
    """The job's row in the submitted file (1 = the first job)."""
    name: str
    id: str
    status: str
    """queued | running | done | failed | cancelled."""
    progress: float
    best: Best


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchView:
    id: str
    status: str
    """queued | running | finished (as ``GET /v1/batches/{id}`` says)."""
    total: int
    finished: int
    counts: dict[str, int]
    progress: float
    jobs: list[JobLine]

    @property
    def done(self) -> bool:
        return self.status == "finished"

    @property
    def poll_s(self) -> int:
        """Seconds between the page's polls: a 2 000-job table is 1.4 MiB and about 1.4 s to
        build on a busy 2-core machine, so large batches poll less often."""
        return 1 if self.total <= 100 else 5

    @property
    def planned(self) -> int:
        """Jobs that found a plan."""
        return sum(1 for j in self.jobs if j.best.row is not None)

    @property
    def no_fit(self) -> int:
        """Jobs that searched and found no layout that fits."""
        return sum(1 for j in self.jobs if j.status == "done" and j.best.row is None)


def batch_view(read: dict[str, Any], rows: list[PlanJobRow], cache: BestCache) -> BatchView:
    """The page's view of a batch: ``BatchService.read``'s summary and the batch's job rows."""
    names = {job["id"]: job["name"] for job in read["jobs"]}
    return BatchView(
        id=read["id"],
        status=read["status"],
        total=read["total"],
        finished=read["finished"],
        counts=read["counts"],
        progress=read["progress"],
        jobs=[
            JobLine(
                number=(row.batch_index or 0) + 1,
                name=names.get(row.id, row.id),
                id=row.id,
                status=STATUS_WORDS.get(row.status, row.status),
                progress=row.progress,
                best=cache.best(row),
            )
            for row in rows
        ],
    )


class BestCache:
    """Finished jobs' outcomes by job id (a finished job's result is never rewritten)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._found: dict[str, Best] = {}
        self._lock = threading.Lock()

    def best(self, row: PlanJobRow) -> Best:
        if row.status not in FINISHED:
            return Best()
        with self._lock:
            found = self._found.get(row.id)
        if found is None:
            found = _outcome(row)
            with self._lock:
                if len(self._found) >= self.size:  # oldest first: dicts keep insertion order
                    del self._found[next(iter(self._found))]
                self._found[row.id] = found
        return found


def _outcome(row: PlanJobRow) -> Best:
    if row.status != "succeeded":
        return Best(reason=row.error or f"the job was {row.status}")
    result, unreadable = read_result(row.result)
    if result is None:
        return Best(reason=unreadable or "the job stored no result")
    if not result.plans:
        reasons = sorted(result.rejections.items(), key=lambda kv: -kv[1])[:2]
        why = "; ".join(f"{n:,} layouts: {r}" for r, n in reasons)
        return Best(reason="no layout fits" + (f" ({why})" if why else ""))
    plan = result.plans[0]
    return Best(row=views.plan_row(1, plan), interval=insight.prediction(plan)["tokens"])
