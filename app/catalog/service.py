"""Catalog service: built-in entries seeded from ``models_db``, user entries versioned in the DB.

Services flush, never commit: the request's unit of work does.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from app.catalog.cache import cache_of
from app.catalog.models import CatalogEntryRow
from app.catalog.network import check_network
from app.catalog.repository import CatalogRepository
from app.catalog.schemas import CatalogEntryRead, ClusterPresetSpec
from app.catalog.spec_numbers import read_spec_numbers
from app.catalog.spec_types import check_spec_types
from app.core.errors import ConflictError, InvalidInputError, NotFoundError
from app.core.messages import RequestError, problem_fields
from planner.specs import GPUSpec, ModelSpec, SpecError

log = logging.getLogger(__name__)

KIND_NAMES = {"model": "model", "gpu": "GPU", "cluster": "cluster"}
DATACLASSES: dict[str, type[ModelSpec] | type[GPUSpec]] = {"model": ModelSpec, "gpu": GPUSpec}


def _jsonable(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):
            value = _jsonable(value)
        out[key] = value
    return out


def cluster_preset_dict(preset: Any) -> dict[str, Any]:
    data = preset.to_dict() if hasattr(preset, "to_dict") else dict(preset)
    gpu = data.get("gpu")
    if isinstance(gpu, dict):
        data["gpu"] = gpu.get("name")
    elif gpu is not None and hasattr(gpu, "name"):
        data["gpu"] = gpu.name
    known = set(ClusterPresetSpec.model_fields)
    return {k: v for k, v in data.items() if k in known}


def builtin_specs() -> dict[str, dict[str, dict[str, Any]]]:
    """Every built-in entry of ``models_db`` as JSON specs, by kind and slug."""
    import models_db  # the catalog package is loaded when asked, not at import time

    out: dict[str, dict[str, dict[str, Any]]] = {"model": {}, "gpu": {}, "cluster": {}}
    for slug in models_db.list_models():
        out["model"][slug] = _jsonable(models_db.load_model(slug).to_dict())
    for slug in models_db.list_gpus():
        out["gpu"][slug] = _jsonable(models_db.load_gpu(slug).to_dict())
    for slug in models_db.list_clusters():
        out["cluster"][slug] = cluster_preset_dict(models_db.load_cluster_preset(slug))
    return out


def seed_builtins(session: Session, specs: dict[str, dict[str, dict[str, Any]]]) -> int:
    """Insert missing built-in entries (idempotent, safe against a concurrent seeder)."""
    repo = CatalogRepository(session)
    added = 0
    for kind, entries in specs.items():
        existing = {row.slug: row for row in repo.list(kind)}
        for slug, spec in entries.items():
            row = existing.get(slug)
            if row is not None:
                if row.builtin and repo.latest(row).spec != spec:  # models_db changed
                    repo.add_version(row, spec, {"source": "models_db"})
                continue
            try:
                with session.begin_nested():
                    repo.create(kind, slug, spec, {"source": "models_db"}, builtin=True)
                added += 1
            except IntegrityError:
                log.info("catalog entry %s/%s was seeded concurrently", kind, slug)
    return added


def to_read(row: CatalogEntryRow, spec: dict[str, Any], meta: dict[str, Any]) -> CatalogEntryRead:
    return CatalogEntryRead(
        kind=row.kind,  # type: ignore[arg-type]
        slug=row.slug,
        builtin=row.builtin,
        version=row.version,
        spec=spec,
        metadata=meta,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class CatalogService:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.repo = CatalogRepository(session)

    # --- reading -----------------------------------------------------------------------------
    def list(self, kind: str) -> list[CatalogEntryRead]:
        rows = self.repo.list(kind)
        latest = self.repo.latest_many(rows)
        return [to_read(r, latest[r.id].spec, latest[r.id].meta) for r in rows if r.id in latest]

    def _row(self, kind: str, slug: str) -> CatalogEntryRow:
        row = self.repo.get(kind, slug)
        if row is None:
            raise NotFoundError(f"no {KIND_NAMES[kind]} named {slug!r}; GET /v1/{kind}s lists them")
        return row

    def get(self, kind: str, slug: str) -> CatalogEntryRead:
        row = self._row(kind, slug)
        version = self.repo.latest(row)
        return to_read(row, version.spec, version.meta)

    def find_spec(self, kind: str, slug: str) -> tuple[dict[str, Any], bool] | None:
        """The latest spec of an entry and whether it is built in; None if there is none
        (from the app's catalog cache when it is fresh: app/catalog/cache.py)."""
        cache = cache_of(self.session)
        if cache is not None:
            hit, value = cache.get(kind, slug)
            if hit:
                return value
        row = self.repo.get(kind, slug)
        found = None if row is None else (self.repo.latest(row).spec, row.builtin)
        if cache is not None:
            cache.put(kind, slug, found)
        return found

    def _forget(self) -> None:
        cache = cache_of(self.session)
        if cache is not None:
            cache.clear()

    # --- writing -----------------------------------------------------------------------------
    def validate(self, kind: str, slug: str, spec: dict[str, Any]) -> dict[str, Any]:
        """The spec as stored, after the domain type has checked it (422 naming the field)."""
        try:
            if kind in DATACLASSES:
                cls = DATACLASSES[kind]
                spec = read_spec_numbers(cls, spec)  # "32" as 32; "1_6": the API's 422
                check_spec_types(cls, spec)
                return _jsonable(cls.from_dict({"name": slug, **spec}).to_dict())
        except RequestError as exc:  # its numbers, named spec.FIELD already
            raise InvalidInputError(exc.message, errors=exc.errors) from exc
        except SpecError as exc:
            field = f"spec.{exc.field}" if exc.field else "spec"
            raise InvalidInputError.for_field(field, exc.message) from exc
        except (TypeError, ValueError) as exc:
            raise InvalidInputError.for_field("spec", f"invalid {kind} spec: {exc}") from exc
        try:
            preset = ClusterPresetSpec.model_validate(spec)
        except ValidationError as exc:  # worded as the plan request's errors, under spec.
            errors = problem_fields([{**e, "loc": ("spec", *e["loc"])} for e in exc.errors()])
            detail = "; ".join(e["message"] for e in errors[:5])
            raise InvalidInputError(f"invalid cluster spec: {detail}", errors=errors) from exc
        try:
            per_gpu = check_network(
                nics_per_node=preset.nics_per_node,
                nic_bandwidth_bytes_per_s=preset.nic_bandwidth_bytes_per_s,
                inter_node_bandwidth_bytes_per_s=preset.inter_node_bandwidth_bytes_per_s
                if "inter_node_bandwidth_bytes_per_s" in preset.model_fields_set
                else None,
                gpus_per_node=preset.gpus_per_node,
            )
        except SpecError as exc:
            raise InvalidInputError.for_field(f"spec.{exc.field}", exc.message) from exc
        if per_gpu is not None:  # stored as both: the per-GPU number every reader knows
            preset = preset.model_copy(update={"inter_node_bandwidth_bytes_per_s": per_gpu})
        if self.repo.get("gpu", preset.gpu) is None:
            raise InvalidInputError.for_field(
                "spec.gpu", f"no GPU named {preset.gpu!r}; GET /v1/gpus lists them"
            )
        return preset.model_dump()

    def create(
        self, kind: str, slug: str, spec: dict[str, Any], meta: dict[str, Any]
    ) -> CatalogEntryRead:
        self._forget()  # this process sees the change at once
        stored = self.validate(kind, slug, spec)
        existing = self.repo.get(kind, slug)
        if existing is not None and existing.builtin:  # a PUT would be refused: no hint to it
            raise ConflictError(
                f"{KIND_NAMES[kind]} {slug!r} is built in and read-only; choose another slug"
            )
        if existing is not None:
            raise ConflictError(
                f"{KIND_NAMES[kind]} {slug!r} already exists; PUT /v1/{kind}s/{slug} adds a version"
            )
        try:
            with self.repo.session.begin_nested():
                row = self.repo.create(kind, slug, stored, meta, builtin=False)
        except IntegrityError as exc:
            raise ConflictError(f"{KIND_NAMES[kind]} {slug!r} already exists") from exc
        return to_read(row, stored, meta)

    def _writable(self, kind: str, slug: str) -> CatalogEntryRow:
        row = self._row(kind, slug)
        if row.builtin:
            raise ConflictError(
                f"{KIND_NAMES[kind]} {slug!r} is built in and read-only; create your own entry "
                f"with POST /v1/{kind}s under another slug"
            )
        return row

    def update(
        self, kind: str, slug: str, spec: dict[str, Any], meta: dict[str, Any]
    ) -> CatalogEntryRead:
        self._forget()  # this process sees the change at once
        row = self._writable(kind, slug)
        stored = self.validate(kind, slug, spec)
        try:
            with self.repo.session.begin_nested():
                self.repo.add_version(row, stored, meta)
        except StaleDataError as exc:  # a DELETE committed between our read and this write
            raise NotFoundError(
                f"{KIND_NAMES[kind]} {slug!r} was deleted by another request; POST /v1/{kind}s "
                "creates it again"
            ) from exc
        except IntegrityError as exc:  # another PUT took this version number first
            raise ConflictError(
                f"{KIND_NAMES[kind]} {slug!r} was changed by another request at the same time; "
                f"GET /v1/{kind}s/{slug} to see its version, then send the PUT again"
            ) from exc
        return to_read(row, stored, meta)

    def delete(self, kind: str, slug: str) -> None:
        self._forget()  # this process sees the change at once
        row = self._writable(kind, slug)
        users = [c.slug for c in self.list("cluster") if kind == "gpu" and c.spec["gpu"] == slug]
        if users:  # deleting it would leave those clusters naming a GPU that no longer exists
            raise ConflictError(
                f"GPU {slug!r} is used by cluster(s) {', '.join(users)}; delete them first "
                f"(DELETE /v1/clusters/SLUG) or point them at another GPU (PUT /v1/clusters/SLUG)"
            )
        if not self.repo.delete(row):  # a DELETE at the same time won: one 204, then 404s
            raise NotFoundError(f"{KIND_NAMES[kind]} {slug!r} was deleted by another request")

    def import_hf(self, slug: str, config: dict[str, Any]) -> CatalogEntryRead:
        from planner.model.hf_config import model_from_hf_config

        try:
            model = model_from_hf_config(config, name=slug)
        except SpecError as exc:
            field = f"config.{exc.field}" if exc.field else "config"
            raise InvalidInputError.for_field(field, exc.message) from exc
        except (TypeError, ValueError, KeyError) as exc:
            raise InvalidInputError.for_field("config", f"not a usable config.json: {exc}") from exc
        spec = _jsonable(model.to_dict())
        spec.pop("name", None)
        return self.create("model", slug, spec, {"source": "hf-config"})
