"""The user's recent searches beside a result, one line each: to compare two searches that
differ in one setting (a sequence length of 4 096, then 32 768), a user had to go Back and
Forward and keep the numbers in mind. The lines give each search's best plan side by side.
"""

from __future__ import annotations

import json
from typing import Any

from app.security.ownership import Viewer
from app.web import job_summary, views
from app.web.backend import JobView, WebBackend

RECENT = 5
"""Searches in the comparison, this one included."""


def _line(job: JobView, current: bool) -> dict[str, Any]:
    plans = job.result.plans if job.status == "succeeded" and job.result is not None else []
    best = views.plan_row(1, plans[0]) if plans else None
    return {
        "id": job.id,
        "current": current,
        "asked": job_summary.summary(job.request),
        "status": job.status if job.finished else "running",
        "best": best,
    }


def context(backend: WebBackend, job: JobView, viewer: Viewer) -> dict[str, Any]:
    """``{"recent": lines}`` for a finished search that has others to compare with, newest
    first; nothing for a search still running (each poll would read them again)."""
    if not job.finished:
        return {}
    seen = [_key(job)]
    others = []
    for other in backend.recent_plans(viewer.key_id, 2 * RECENT):
        if _key(other) not in seen:  # the same request again has the same answer
            seen.append(_key(other))
            others.append(other)
    if not others:
        return {}
    return {"recent": [_line(job, True)] + [_line(j, False) for j in others[: RECENT - 1]]}


def _key(job: JobView) -> str:
    return json.dumps(job.request, sort_keys=True, default=str)
