"""The batch row: one plan request of a batch, in ``POST /v1/batches`` and ``planner batch``.

A CSV row, a YAML/JSON object or an element of the API's ``jobs`` list all validate against
:class:`BatchJobCreate`, so a row has the plan request's fields, bounds, defaults and messages
(named by its column or key).
"""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.schemas import Page, RequestModel
from app.planning.schemas import PLAN_EXAMPLE, PlanJobCreate

MAX_BATCH_JOBS = 2000


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (OWASP, CSV injection)."""


class BatchJobCreate(PlanJobCreate):
    """A plan request and the name its result rows carry (default ``job-N``)."""

    name: str | None = Field(default=None, max_length=200)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        """The name is a cell of the results CSV and a label on the web page: no formula start,
        and no invisible control or format character (U+202E reverses the text shown)."""
        if value is None:
            return value
        if value.startswith(FORMULA_STARTS):
            raise ValueError(
                f"must not start with {value[0]!r}: a spreadsheet opening the results CSV would "
                "run it as a formula; start the name with a letter or digit"
            )
        hidden = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf")), None)
        if hidden is not None:
            name = unicodedata.name(hidden, "a control character")
            raise ValueError(
                f"contains the invisible character U+{ord(hidden):04X} ({name}); remove it"
            )
        return value


class BatchCreate(RequestModel):
    """Plan jobs (the body of ``POST /v1/plan-jobs``, plus an optional ``name`` each).

    Each job is the single-plan request (:class:`BatchJobCreate`), validated at submission: a
    bad field is a 422 naming ``jobs.N.field`` and nothing is stored."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"jobs": [{"name": "70b-64", **PLAN_EXAMPLE}]}]},
    )

    jobs: list[BatchJobCreate] = Field(min_length=1, max_length=MAX_BATCH_JOBS)


class BatchCounts(BaseModel):
    """A batch's status and how many of its jobs are where (a listing's item, a batch's read)."""

    id: str
    status: Literal["queued", "running", "finished"]
    total: int
    """Jobs in the batch."""
    finished: int
    counts: dict[str, int]
    """Jobs per status: queued, running, succeeded, failed, cancelled."""


class BatchSummary(BatchCounts):
    """One batch of a listing (``GET /v1/batches/{id}`` has its jobs)."""

    created_at: datetime
    names: list[str]
    """The first three job names, in submission order."""
    links: dict[str, str]


class BatchPage(Page):
    items: list[BatchSummary]
