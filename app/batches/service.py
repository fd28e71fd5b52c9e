"""Batches: N plan jobs submitted together, run by the ordinary workers, grouped by a batch row.

``POST /v1/batches`` takes a batch whole or not at all: a job that ``POST /v1/plan-jobs`` would
refuse (bad field, unknown model) is a 422 naming ``jobs.N.field``, and nothing is stored. A job
that is valid but has no feasible layout still runs and reports it. Services flush, never commit.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from sqlalchemy.orm import Session

from app.batches.models import BatchRow
from app.batches.repository import BatchRepository
from app.batches.rows import rows_for_stored
from app.batches.schemas import BatchJobCreate
from app.core.database import utcnow
from app.core.errors import AppError, ConflictError, InvalidInputError, NotFoundError
from app.planning.backend import PlanningBackend
from app.planning.convert import error_text, parse_request
from app.planning.models import PlanJobRow
from app.planning.schemas import FINISHED
from app.planning.service import PlanJobService, request_hash
from app.security.ownership import Viewer
from planner import SpecError


class BatchService:
    def __init__(
        self, session: Session, backend: PlanningBackend, viewer: Viewer | None = None
    ) -> None:
        self.session = session
        self.backend = backend
        self.repo = BatchRepository(session)
        self.viewer = viewer
        """The caller: owns the batches it submits; sees others' only as admin (None: all)."""

    def submit(self, jobs: list[dict[str, Any]], *, all_or_nothing: bool = False) -> BatchRow:
        """Queue every job of the batch; a job that cannot run is stored as failed, or with
        ``all_or_nothing`` (the API) an InvalidInputError names every bad job's fields as
        ``jobs.N.field`` once all were checked (the caller's unit of work then stores nothing)."""
        names = [str(job.get("name") or f"job-{i + 1}") for i, job in enumerate(jobs)]
        owner = self.viewer.key_id if self.viewer else None
        batch = self.repo.add(
            BatchRow(
                id=str(uuid.uuid4()), names={"names": names}, total=len(jobs), owner_key_id=owner
            )
        )
        plan_jobs = PlanJobService(self.session, self.backend, self.viewer)
        refused: list[dict[str, str]] = []
        for index, job in enumerate(jobs):
            body = {k: v for k, v in job.items() if k != "name"}
            error: str | None = None
            try:
                parsed = parse_request(BatchJobCreate, job)
                with self.session.begin_nested():
                    row, _ = plan_jobs.submit(
                        parsed.model_dump(mode="json", exclude_none=True, exclude={"name"}), None
                    )
            except SpecError as exc:  # RequestError too
                error = error_text(exc)
                refused += job_fields(index, getattr(exc, "errors", None), exc.field, exc.message)
            except AppError as exc:
                error = exc.message
                refused += job_fields(index, exc.errors, None, exc.message)
            if error is not None:
                row = PlanJobRow(
                    id=str(uuid.uuid4()),
                    status="failed",
                    request_hash=request_hash(body),
                    request=body,
                    resolved={},
                    error=error,
                    finished_at=utcnow(),
                    owner_key_id=owner,
                )
                self.session.add(row)
            row.batch_id, row.batch_index = batch.id, index
        if all_or_nothing and refused:
            bad = len({e["field"].split(".")[1] for e in refused})
            detail = "; ".join(e["message"] for e in refused[:5])
            raise InvalidInputError(
                f"{bad} of {len(jobs)} jobs cannot be planned; fix them and send the batch "
                f"again (nothing was stored): {detail}",
                errors=refused,
            )
        self.session.flush()
        return batch

    def get(self, batch_id: str) -> BatchRow:
        batch = self.repo.get(batch_id)
        if batch is None:
            raise NotFoundError(f"no batch {batch_id!r}")
        if self.viewer is not None:
            self.viewer.check(batch.owner_key_id, f"batch {batch_id}")
        return batch

    def jobs(self, batch_id: str) -> list[PlanJobRow]:
        """The batch's plan jobs in submission order (the caller must be allowed to see it)."""
        self.get(batch_id)
        return self.repo.jobs(batch_id)

    def read(self, batch_id: str) -> dict[str, Any]:
        """Status, progress and the jobs of a batch (the JSON of ``GET /v1/batches/{id}``)."""
        batch = self.get(batch_id)
        jobs = self.repo.jobs(batch_id)
        names = batch.names["names"]
        counts = Counter(j.status for j in jobs)
        finished = sum(counts[s] for s in FINISHED)
        running = sum(j.progress for j in jobs if j.status == "running")
        status = batch_status(counts, batch.total)
        base = f"/v1/batches/{batch.id}"
        return {
            "id": batch.id,
            "status": status,
            "total": batch.total,
            "finished": finished,
            "counts": {s: counts[s] for s in ("queued", "running", *FINISHED)},
            "progress": round((finished + running) / batch.total, 4) if batch.total else 1.0,
            "created_at": batch.created_at.isoformat(),
            "jobs": [
                {
                    "name": names[j.batch_index or 0],
                    "id": j.id,
                    "status": j.status,
                    "error": j.error,
                }
                for j in jobs
            ],
            "links": {
                "self": base,
                "results_csv": f"{base}/results?format=csv",
                "results_json": f"{base}/results?format=json",
            },
        }

    def recent(self, limit: int = 20, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The caller's newest batches (an admin: everyone's), each with its status and job
        counts, and how many batches it has in all (``GET /v1/batches``, the web's list)."""
        owner = self.viewer.owner_filter() if self.viewer is not None else (False, None)
        batches, total = self.repo.recent(limit, owner, offset)
        counts = self.repo.status_counts_of([b.id for b in batches])
        items = []
        for batch in batches:
            found = Counter(counts[batch.id])
            items.append(
                {
                    "id": batch.id,
                    "status": batch_status(found, batch.total),
                    "total": batch.total,
                    "finished": sum(found[s] for s in FINISHED),
                    "counts": {s: found[s] for s in ("queued", "running", *FINISHED)},
                    "created_at": batch.created_at,
                    "names": batch.names["names"][:3],
                    "links": {"self": f"/v1/batches/{batch.id}"},
                }
            )
        return items, total

    def results(self, batch_id: str, *, partial: bool = False) -> list[dict[str, Any]]:
        """One row per job and rank, in submission order (the columns of ``planner batch``)."""
        batch = self.get(batch_id)
        jobs = self.repo.jobs(batch_id)
        pending = [j for j in jobs if j.status not in FINISHED]
        if pending and not partial:
            raise ConflictError(
                f"batch {batch_id} has {len(pending)} of {batch.total} jobs still queued or "
                f"running; results exist once it has finished (or ask with ?partial=true)"
            )
        names = batch.names["names"]
        rows: list[dict[str, Any]] = []
        for job in jobs:
            name = names[job.batch_index or 0]
            if job.status == "succeeded" and job.result is not None:
                result = job.result
            elif job.status in FINISHED:
                result = {"error": job.error or f"the job was {job.status}"}
            else:
                result = {"error": f"still {job.status}"}
            rows.extend(rows_for_stored(name, result, job.request))
        return rows


def job_fields(
    index: int, errors: list[dict[str, str]] | None, field: str | None, message: str
) -> list[dict[str, str]]:
    """A job's errors as the API's problem fields, under ``jobs.N`` (as FastAPI names a field
    of a list in the body), each message saying which job it is about."""
    found = errors or [{"field": field or "", "message": message}]
    out = []
    for err in found:
        inner = err.get("field") or ""
        where = f"jobs.{index}" + (f".{inner}" if inner not in ("", "body") else "")
        out.append({"field": where, "message": f"jobs.{index}: {err['message']}"})
    return out


def batch_status(counts: Counter[str], total: int) -> str:
    """A batch's status from its jobs': finished when every one has, queued while none began."""
    if sum(counts[s] for s in FINISHED) == total:
        return "finished"
    if counts["queued"] == total:
        return "queued"
    return "running"
