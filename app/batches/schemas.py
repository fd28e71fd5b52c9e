"""The batch row: one plan request of a batch, in ``POST /v1/batches`` and ``planner batch``.

A CSV row, a YAML/JSON object or an element of the API's ``jobs`` list all validate against
:class:`BatchJobCreate`, so a row has the plan request's fields, bounds, defaults and messages
(named by its column or key).
"""

from __future__ import annotations

from pydantic import Field

from app.planning.schemas import PlanJobCreate


class BatchJobCreate(PlanJobCreate):
    """A plan request and the name its result rows carry (default ``job-N``)."""

    name: str | None = Field(default=None, max_length=200)
