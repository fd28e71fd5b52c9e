"""What the web pages need from the rest of the service, behind one small interface.

Routes ask a :class:`WebBackend` (found through :func:`get_backend`, replaceable in tests with
``app.dependency_overrides``) for the catalog, to check a request, to submit a plan job and to
read it back. The default backend goes through the service: the catalog service, plan-job rows
and the in-process workers, so searches never run in the request thread.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from fastapi import Depends, Request
from pydantic import ValidationError

from app.planning.reports import PlanAnswer, plan_answer
from app.planning.schemas import FINISHED
from planner import SpecError

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobView:
    """A plan job as the pages show it."""

    id: str
    status: str
    """queued | running | succeeded | failed | cancelled."""
    progress: float = 0.0
    """0..1."""
    evaluated: int = 0
    total: int | None = None
    request: dict[str, Any] = dataclasses.field(default_factory=dict)
    result: PlanAnswer | None = None
    """The stored result, read once into its typed answer (see :func:`read_result`)."""
    error: str | None = None
    elapsed_s: float | None = None
    owner_key_id: str | None = None
    """The API key that submitted it (None without auth)."""

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


class WebBackend(Protocol):
    def list_models(self) -> list[str]: ...
    def list_gpus(self) -> list[str]: ...
    def list_clusters(self) -> list[str]: ...
    def catalog_rows(self, kind: str) -> list[dict[str, Any]]: ...
    def parse_hf_config(self, config: dict[str, Any], name: str) -> dict[str, Any]: ...
    def check_request(self, request: dict[str, Any]) -> dict[str, Any]: ...
    def submit_plan(
        self, request: dict[str, Any], owner: str | None = None, submission: str | None = None
    ) -> str: ...
    def store_model(self, slug: str, config: dict[str, Any]) -> dict[str, Any]: ...
    def calibration_preview(
        self, cluster: str, body: bytes, media_type: str, save: bool
    ) -> dict[str, Any]: ...
    def suggest_runs(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def get_plan(self, job_id: str) -> JobView | None: ...
    def recent_plans(self, owner: str | None, limit: int) -> list[JobView]: ...
    def stored_rows(self, cluster: str) -> tuple[int, int]: ...
    def delete_entry(self, kind: str, slug: str, *, purge: bool) -> None: ...
    def delete_measurements(self, cluster: str) -> None: ...
    def detached_groups(self) -> list[dict[str, Any]]: ...
    def detached_measurements(self, former: str) -> list[dict[str, Any]]: ...
    def delete_detached(self, former: str) -> tuple[int, int]: ...


def get_backend(request: Request) -> WebBackend:
    """The app's backend, built on first use and kept on ``app.state`` (never module-global)."""
    state = request.app.state
    backend: WebBackend | None = getattr(state, "web_backend", None)
    if backend is None:
        with _BUILD_LOCK:
            backend = getattr(state, "web_backend", None)
            if backend is None:
                backend = ServiceBackend(request.app)
                state.web_backend = backend
    return backend


_BUILD_LOCK = threading.Lock()
Backend = Annotated[WebBackend, Depends(get_backend)]


def _spec_error(exc: Exception) -> SpecError:
    """An AppError from the service (problem JSON with field errors) as a SpecError."""
    errors = getattr(exc, "errors", None) or []
    field = errors[0].get("field") if errors else None
    message = errors[0].get("message") if errors else None
    return SpecError(str(message or getattr(exc, "message", exc)), field=field)


class ServiceBackend:
    """The default backend: the service's catalog, plan-job queue and workers."""

    def __init__(self, app: Any) -> None:
        self._app = app

    def _session(self) -> Any:
        from app.core.engine import unit_of_work

        return unit_of_work(self._app.state.session_factory)

    # --- catalog ---------------------------------------------------------------------------
    def _entries(self, kind: str) -> list[Any]:
        from app.catalog.service import CatalogService

        with self._session() as session:
            return list(CatalogService(session).list(kind))

    def list_models(self) -> list[str]:
        return [e.slug for e in self._entries("model")]

    def list_gpus(self) -> list[str]:
        return [e.slug for e in self._entries("gpu")]

    def list_clusters(self) -> list[str]:
        return [e.slug for e in self._entries("cluster")]

    def catalog_rows(self, kind: str) -> list[dict[str, Any]]:
        singular = {"models": "model", "gpus": "gpu", "clusters": "cluster"}[kind]
        return [{"slug": e.slug, **e.spec, "builtin": e.builtin} for e in self._entries(singular)]

    def parse_hf_config(self, config: dict[str, Any], name: str) -> dict[str, Any]:
        from planner.model.hf_config import model_from_hf_config

        try:
            spec = model_from_hf_config(config, name=name)
        except SpecError as exc:
            raise SpecError(exc.message, field="hf_config") from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(
                f"config.json is missing or has a bad value: {exc}", field="hf_config"
            ) from exc
        return dict(spec.to_dict())

    def store_model(self, slug: str, config: dict[str, Any]) -> dict[str, Any]:
        """Add a model to the catalog from its config.json (a new user entry)."""
        from app.catalog.service import CatalogService
        from app.core.errors import AppError, ConflictError

        try:
            with self._session() as session:
                entry = CatalogService(session).import_hf(slug, config)
        except ConflictError as exc:  # the API's message points at PUT; a page has no PUT
            raise SpecError(
                f"a model named {slug!r} is already in the catalog: pick another name for "
                "this one (the table above shows the existing entry)",
                field="name",
            ) from exc
        except AppError as exc:
            raise SpecError(
                exc.message if not getattr(exc, "errors", None) else _spec_error(exc).message,
                field="hf_config",
            ) from exc
        return {"slug": entry.slug, **entry.spec}

    def delete_entry(self, kind: str, slug: str, *, purge: bool) -> None:
        """Delete a user entry as ``DELETE /v1/{kind}/{slug}`` does (its AppError, 404 or
        409, propagates); a cluster with stored rows only with ``purge``."""
        from app.calibration.service import CalibrationService
        from app.catalog.service import CatalogService

        with self._session() as session:
            if kind == "clusters":
                CalibrationService(session, self._app.state.backend).delete_cluster(
                    slug, purge=purge
                )
            else:
                CatalogService(session).delete(kind.removesuffix("s"), slug)

    def stored_rows(self, cluster: str) -> tuple[int, int]:
        """(measurements, calibrations) stored for a cluster (404 for an unknown one)."""
        from app.calibration.service import CalibrationService

        with self._session() as session:
            service = CalibrationService(session, self._app.state.backend)
            service.cluster(cluster)
            return service.measurements.count(cluster), service.calibrations.count(cluster)

    def delete_measurements(self, cluster: str) -> None:
        from app.calibration.service import CalibrationService

        with self._session() as session:
            CalibrationService(session, self._app.state.backend).delete_measurements(cluster)

    # --- detached rows: a deleted cluster's, as /v1/detached-measurements serves them -------
    def detached_groups(self) -> list[dict[str, Any]]:
        """Per former cluster name: its detached measurements and calibrations, counted."""
        from app.calibration.detached import DetachedService

        with self._session() as session:
            return [g.model_dump() for g in DetachedService(session).list().items]

    def detached_measurements(self, former: str) -> list[dict[str, Any]]:
        """The detached runs of one former name, each as the row it was uploaded as (404 when
        it has none)."""
        from app.calibration.detached import DetachedService

        with self._session() as session:
            return [m.data for m in DetachedService(session).get(former).measurements]

    def delete_detached(self, former: str) -> tuple[int, int]:
        """(measurements, calibrations) deleted of one former name (404 when it has none)."""
        from app.calibration.detached import DetachedService

        with self._session() as session:
            gone = DetachedService(session).delete(former)
            return gone.measurements, gone.calibrations

    # --- calibration -----------------------------------------------------------------------
    def calibration_preview(
        self, cluster: str, body: bytes, media_type: str, save: bool
    ) -> dict[str, Any]:
        """Fit the cluster's GPU profile to uploaded runs (the preview); with ``save``, store
        the rows and a calibration instead: ``{"saved": id}``, whose page shows what it stored."""
        from app.calibration.fit import fit_preview, gpu_rows
        from app.calibration.service import CalibrationService
        from app.core.errors import AppError

        with self._session() as session:
            service = CalibrationService(session, self._app.state.backend)
            try:
                gpu = service.cluster(cluster)["gpu"]
            except AppError as exc:
                raise SpecError(exc.message, field="cluster") from exc
            try:  # the one calibrate request, read from the upload as the API reads it
                found = service.upload_rows(cluster, body, media_type)
            except AppError as exc:
                raise SpecError(_spec_error(exc).message, field="file") from exc
        if not save:
            return fit_preview(found.rows, gpu)
        # saved: the answer is the stored calibration's page (303), whose comparison the
        # service stores from its own fit; the upload is checked as the preview would, unfitted
        gpu_rows(found.rows, gpu)
        try:
            with self._session() as session:
                service = CalibrationService(session, self._app.state.backend)
                service.add_measurements(cluster, body, media_type)
                return {"saved": service.calibrate(cluster).id}
        except AppError as exc:
            raise SpecError(_spec_error(exc).message, field="file") from exc

    def suggest_runs(self, body: dict[str, Any]) -> dict[str, Any]:
        """What to measure next, as ``POST /v1/calibration-suggestions`` answers it: the
        service's clusters and models resolve, and a cluster's calibration and stored
        measurements count (one function for both: app.planning.suggest.suggest_stored)."""
        from app.core.errors import AppError
        from app.planning.convert import parse_request
        from app.planning.suggest import SuggestionRequest, suggest_stored

        request = parse_request(SuggestionRequest, body)
        try:
            with self._session() as session:
                return suggest_stored(session, self._app.state.backend, request)
        except AppError as exc:  # an unknown cluster or model reference
            raise _spec_error(exc) from exc

    # --- planning --------------------------------------------------------------------------
    def check_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request as it will run (a pasted config becomes an inline model spec); raises
        SpecError naming the field for anything cheap to check before a job is queued."""
        req = dict(request)
        model = req.get("model")
        if isinstance(model, dict) and "hf_config" in model:
            config = model["hf_config"]
            if "num_layers" in config and "hidden_size" in config:  # already a model spec
                req["model"] = config
                return self._check_axes(req)
            name = str(config.get("_name_or_path") or config.get("model_type") or "pasted")
            spec = self.parse_hf_config(config, name.rsplit("/", 1)[-1])
            req["model"] = spec
        return self._check_axes(req)

    def _check_axes(self, req: dict[str, Any]) -> dict[str, Any]:
        """The form's request as the one plan request (``PlanJobCreate``): its bounds and
        messages, the same as the API's."""
        from app.planning.convert import expand_text_lists, parse_request
        from app.planning.memory_request import to_memory_choices
        from app.planning.schemas import PlanJobCreate

        request = parse_request(PlanJobCreate, expand_text_lists(req))
        to_memory_choices(request)  # the memory settings' own messages, under their inputs
        return request.model_dump(mode="json", exclude_none=True)

    def submit_plan(
        self, request: dict[str, Any], owner: str | None = None, submission: str | None = None
    ) -> str:
        """Queue a plan job. ``submission`` (the form's one-per-page token) makes a second post
        of the same form with the same values (a double click) the same job, not a second one;
        other values are another request, so the key carries their hash."""
        from app.core.errors import AppError
        from app.planning.service import PlanJobService, request_hash
        from app.security.ownership import Viewer

        key = f"web-form:{submission}:{request_hash(request)}" if submission else None
        try:
            with self._session() as session:
                viewer = Viewer(key_id=owner, admin=True)  # the owner of what it submits
                service = PlanJobService(session, self._app.state.backend, viewer)
                job, created = service.submit(request, key)
                if not created and job.status in ("failed", "cancelled"):  # a retry: run again
                    job, _ = service.submit(request, None)
                job_id = str(job.id)
        except AppError as exc:
            raise _spec_error(exc) from exc
        pool = getattr(self._app.state, "worker_pool", None)
        if pool is not None:
            pool.wake()
        return job_id

    def get_plan(self, job_id: str) -> JobView | None:
        from app.planning.repository import PlanJobRepository

        with self._session() as session:
            row = PlanJobRepository(session).get(job_id)
            return None if row is None else _job_view(row)

    def recent_plans(self, owner: str | None, limit: int) -> list[JobView]:
        """The newest searches of the plan form by ``owner`` (every search without sign-in),
        finished or not; a batch's jobs are the batch page's."""
        from app.planning.repository import PlanJobRepository

        with self._session() as session:
            rows, _ = PlanJobRepository(session).list(
                None, 4 * limit, 0, only_owner=True, owner=owner
            )
            own = [r for r in rows if r.batch_id is None and r.parent_id is None][:limit]
            return [_job_view(row) for row in own]


def _job_view(row: Any) -> JobView:
    """A plan-job row as the pages show it."""
    elapsed = None
    if row.started_at is not None:
        end = row.finished_at or row.heartbeat_at or row.started_at
        elapsed = (end - row.started_at).total_seconds()
    result, unreadable = read_result(row.result)
    return JobView(
        id=row.id,
        status="failed" if unreadable else row.status,
        progress=row.progress,
        evaluated=row.layouts_evaluated,
        total=row.layouts_total,
        request=dict(row.request),
        result=result,
        error=unreadable or row.error,
        elapsed_s=elapsed,
        owner_key_id=row.owner_key_id,
    )


def read_result(stored: dict[str, Any] | None) -> tuple[PlanAnswer | None, str | None]:
    """A job's stored JSON as its typed answer, the one place the pages parse it; a document
    that no longer reads (a field renamed since it was stored) comes back as (None, why) so the
    page says so instead of showing empty cells."""
    if stored is None:
        return None, None
    try:
        return plan_answer(stored), None
    except ValidationError as exc:
        log.warning("a stored plan result does not read as a typed answer: %s", exc)
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return None, f"the stored result no longer reads as a plan result ({where}: {first['msg']})"
