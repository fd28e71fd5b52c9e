"""Plan-job service: resolve catalog references, queue jobs idempotently, cancel, list, wait.

Services flush, never commit; the route's unit of work commits.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import time
import uuid
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.calibration.repository import CalibrationRepository
from app.catalog.names import cluster_slug_for
from app.catalog.service import CatalogService
from app.core.database import utcnow
from app.core.errors import ConflictError, InvalidInputError, NotFoundError
from app.planning.backend import PlanningBackend
from app.planning.convert import RequestError, builtin_cluster, inline_cluster, parse_request
from app.planning.models import PlanJobRow
from app.planning.reports import PlanAnswer, plan_answer
from app.planning.repository import PlanJobRepository
from app.planning.schemas import FINISHED, PlanJobCreate, PlanJobPage, PlanJobRead
from app.security.ownership import Viewer
from planner import SpecError


def request_hash(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def resolve_references(
    session: Session, body: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request that ``app.planning.compute`` can run, and what was resolved to build it.

    User-defined catalog entries (stored here, unknown to ``models_db``) are inlined; a cluster
    (a user's, or a preset named by its slug or a GPU alias) becomes its gpu, gpus_per_node and
    network numbers, and its newest calibration becomes the profile. Built-in model and GPU
    names stay names for :mod:`app.planning.convert` (aliases and "did you mean" included).
    """
    catalog = CatalogService(session)
    req = {k: v for k, v in body.items() if v is not None}
    resolved: dict[str, Any] = {}
    cluster = req.get("cluster")
    if cluster is not None:
        cluster = _cluster_slug(catalog, cluster)
        found = catalog.find_spec("cluster", cluster)
        preset = found[0] if found is not None else builtin_cluster(cluster)
        # the runner gets plain numbers: the same for a preset or a user's (one rule, in convert)
        req = inline_cluster(req, preset)
        resolved["cluster"] = {"slug": cluster, **preset}
        # a calibration describes the GPU it was fitted on: once the cluster names another GPU
        # (a PUT, or a slug deleted and created again) that GPU's shipped profile applies
        fitted = CalibrationRepository(session).list(cluster)  # newest first
        calibration = next((c for c in fitted if c.profile.get("gpu") == preset["gpu"]), None)
        if calibration is not None:
            resolved["profile"] = {"calibration_id": calibration.id, "profile": calibration.profile}
    for kind in ("model", "gpu"):
        ref = req.get(kind)
        if isinstance(ref, str):
            found = catalog.find_spec(kind, ref)
            if found is not None:
                spec, builtin = found
                resolved[kind] = spec
                if not builtin:
                    req[kind] = spec
    return req, resolved


def _cluster_slug(catalog: CatalogService, name: str) -> str:
    """A user cluster's slug, or the built-in preset a name or alias means (did you mean...)."""
    if catalog.find_spec("cluster", name) is not None:
        return name
    try:
        return cluster_slug_for(name)
    except SpecError as exc:
        known = [entry.slug for entry in catalog.list("cluster")]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise InvalidInputError.for_field(
            "cluster", f"unknown cluster {name!r}; {hint}GET /v1/clusters lists them"
        ) from exc


def to_read(row: PlanJobRow) -> PlanJobRead:
    base = f"/v1/plan-jobs/{row.id}"
    return PlanJobRead(
        id=row.id,
        status=row.status,  # type: ignore[arg-type]
        progress=row.progress,
        layouts_evaluated=row.layouts_evaluated,
        layouts_total=row.layouts_total,
        attempts=row.attempts,
        cancel_requested=row.cancel_requested,
        error=row.error,
        request=row.request,
        resolved={k: v for k, v in row.resolved.items() if k != "planner_request"},
        created_at=row.created_at,
        started_at=row.started_at,
        heartbeat_at=row.heartbeat_at,
        finished_at=row.finished_at,
        links={"self": base, "plans": f"{base}/plans", "cancel": f"{base}/cancel"},
    )


class PlanJobService:
    def __init__(
        self, session: Session, backend: PlanningBackend, viewer: Viewer | None = None
    ) -> None:
        self.session = session
        self.backend = backend
        self.repo = PlanJobRepository(session)
        self.viewer = viewer
        """The caller: owns what it submits, sees only its own jobs unless admin (None: all)."""

    def submit(self, body: dict[str, Any], idempotency_key: str | None) -> tuple[PlanJobRow, bool]:
        """Queue a job; returns (job, created). The same key with the same body is one job.

        ``body`` is a ``PlanJobCreate`` (from any interface: the API, the web form, a batch).
        """
        try:
            body = parse_request(PlanJobCreate, body).model_dump(mode="json", exclude_none=True)
        except RequestError as exc:
            raise InvalidInputError(exc.message, errors=exc.errors) from exc
        digest = request_hash(body)
        shown, idempotency_key = (
            idempotency_key,
            (self.viewer.idempotency_key(idempotency_key) if self.viewer else idempotency_key),
        )
        if idempotency_key is not None:
            existing = self._same_key(idempotency_key, digest, shown)
            if existing is not None:
                return existing, False
        req, resolved = resolve_references(self.session, body)
        for key, spec in self.backend.validate_plan(req).items():
            resolved.setdefault(key, spec)
        resolved["planner_request"] = req
        row = PlanJobRow(
            id=str(uuid.uuid4()),
            status="queued",
            idempotency_key=idempotency_key,
            owner_key_id=self.viewer.key_id if self.viewer else None,
            request_hash=digest,
            request=body,
            resolved=resolved,
            created_at=utcnow(),
        )
        try:
            with self.session.begin_nested():
                self.repo.add(row)
        except IntegrityError:
            if idempotency_key is None:
                raise
            existing = self._same_key(idempotency_key, digest, shown)
            if existing is None:  # pragma: no cover - the row that collided must exist
                raise
            return existing, False
        return row, True

    def _same_key(self, key: str, digest: str, shown: str | None) -> PlanJobRow | None:
        existing = self.repo.get_by_idempotency_key(key)
        if existing is not None and existing.request_hash != digest:
            raise ConflictError(
                f"Idempotency-Key {shown!r} was already used for a different request (job "
                f"{existing.id}); use a new key for a new request"
            )
        return existing

    def get(self, job_id: str) -> PlanJobRow:
        row = self.repo.get(job_id)
        if row is None:
            raise NotFoundError(f"no plan job {job_id!r}; GET /v1/plan-jobs lists them")
        if self.viewer is not None:
            self.viewer.check(row.owner_key_id, f"plan job {job_id}")
        return row

    def plans(self, job_id: str) -> PlanAnswer:
        row = self.get(job_id)
        if row.status != "succeeded" or row.result is None:
            hint = f": {row.error}" if row.error else ""
            raise ConflictError(
                f"plan job {job_id} is {row.status}{hint}; plans exist once it has succeeded "
                f"(GET /v1/plan-jobs/{job_id} shows its progress)"
            )
        return plan_answer(row.result)

    def cancel(self, job_id: str) -> PlanJobRow:
        row = self.get(job_id)
        if row.status in FINISHED:
            raise ConflictError(f"plan job {job_id} has already {row.status}; nothing to cancel")
        if not self.repo.cancel_queued(job_id):
            self.repo.request_cancel(job_id)
        return self.get(job_id)

    def list(self, status: str | None, limit: int, offset: int) -> PlanJobPage:
        only_owner, owner = self.viewer.owner_filter() if self.viewer else (False, None)
        rows, total = self.repo.list(status, limit, offset, only_owner=only_owner, owner=owner)
        return PlanJobPage(
            items=[to_read(r) for r in rows], total=total, limit=limit, offset=offset
        )


def wait_until_finished(
    factory: sessionmaker[Session], job_id: str, timeout_s: float, poll_s: float = 0.05
) -> PlanJobRow | None:
    """The job once it has finished, or None if it is still going after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        with factory() as session:
            row = PlanJobRepository(session).get(job_id)
            if row is not None and row.status in FINISHED:
                return row
        if time.monotonic() >= deadline:
            return None
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
        poll_s = min(poll_s * 1.5, 0.5)
