"""Measurements of a user's cluster (JSON rows, CSV, Megatron-LM logs) and calibrations on them.

Rows use the columns of ``shared/data/measured-throughput.csv``; a calibration fits a
performance profile for the cluster's GPU and stores it with its cross-validated error, and
later plan jobs on the cluster (request field ``cluster``) run with the newest one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.calibration.deps import CalibrationBackend
from app.calibration.models import CalibrationRow, MeasurementRow
from app.calibration.repository import CalibrationRepository, MeasurementRepository
from app.calibration.request import (
    MeasurementRows,
    UnsupportedMedia,
    body_field,
    from_body,
    measurement_rows,
)
from app.calibration.schemas import CalibrationDetail, CalibrationRead, MeasurementRead
from app.catalog.service import CatalogService
from app.core.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    UnsupportedMediaError,
)
from planner.specs import SpecError


def _report_dict(report: Any) -> dict[str, Any]:
    if isinstance(report, dict):
        return report
    if hasattr(report, "to_dict"):
        return dict(report.to_dict())
    import dataclasses

    return dataclasses.asdict(report)


class CalibrationService:
    def __init__(self, session: Session, backend: CalibrationBackend) -> None:
        self.session = session
        self.backend = backend
        self.catalog = CatalogService(session)
        self.measurements = MeasurementRepository(session)
        self.calibrations = CalibrationRepository(session)

    def cluster(self, slug: str) -> dict[str, Any]:
        return self.catalog.get("cluster", slug).spec

    def upload_rows(self, slug: str, body: bytes, content_type: str) -> MeasurementRows:
        """An upload as the one calibrate request (rows of this cluster are about its GPU
        unless they say otherwise), converted into measurement rows."""
        preset = self.cluster(slug)
        defaults = {"gpu": preset["gpu"], "gpus_per_node": preset["gpus_per_node"]}
        try:
            return measurement_rows(from_body(body, content_type, **defaults))
        except UnsupportedMedia as exc:
            raise UnsupportedMediaError(exc.message) from exc
        except SpecError as exc:
            raise InvalidInputError.for_field(body_field(exc.field), exc.message) from exc

    def add_measurements(self, slug: str, body: bytes, content_type: str) -> tuple[int, int]:
        found = self.upload_rows(slug, body, content_type)
        self._check_rows(found.rows)
        added = self.measurements.add_many(slug, found.source, found.rows)
        return added, len(self.measurements.list(slug))

    def _check_rows(self, rows: list[dict[str, str]]) -> None:
        """Reject rows the calibration could not use, naming the row and the column."""
        try:
            self.backend.check_measurements(rows)
        except SpecError as exc:
            raise InvalidInputError.for_field(exc.field or "rows", exc.message) from exc

    def list_measurements(self, slug: str) -> list[MeasurementRead]:
        self.cluster(slug)
        return [measurement_read(m) for m in self.measurements.list(slug)]

    def calibrate(self, slug: str) -> CalibrationRead:
        preset = self.cluster(slug)
        rows = [m.data for m in self.measurements.list(slug)]
        if not rows:
            raise ConflictError(
                f"cluster {slug!r} has no measurements; upload some with "
                f"POST /v1/clusters/{slug}/measurements first"
            )
        try:
            profile, report = self.backend.calibrate(rows, preset["gpu"])
        except SpecError as exc:
            raise InvalidInputError.for_field(exc.field or "measurements", exc.message) from exc
        report = dict(_report_dict(report))
        row = self.calibrations.add(
            CalibrationRow(
                cluster_slug=slug,
                num_measurements=len(rows),
                profile=profile,
                report=report,
                # what its page shows, from the same fit (app.calibration.fit.calibrate_gpu)
                comparison=report.pop("comparison", None),
            )
        )
        return to_read(row)

    def comparison(self, slug: str, calibration_id: int) -> CalibrationDetail:
        """A stored calibration with what its page shows: stored with the fit; for one stored
        before that (or by another version of the page), computed once from the rows it was
        fitted on (the cluster's first ``num_measurements`` stored rows) and its stored profile
        and report, fitting nothing (a fit run again today may give another profile than the
        one planning uses), and stored."""
        preset = self.cluster(slug)
        row = self.calibrations.get(slug, calibration_id)
        if row is None:
            raise NotFoundError(
                f"cluster {slug!r} has no calibration {calibration_id} (its stored runs may "
                "have been deleted since): upload the runs again on the calibration page"
            )
        from app.calibration.fit import COMPARISON_VERSION, stored_comparison

        stored = row.comparison
        if stored is None or stored.get("version") != COMPARISON_VERSION:
            rows = [m.data for m in self.measurements.list(slug)][: row.num_measurements]
            try:
                # on the GPU it was fitted on: the cluster may have moved to another since
                gpu = str(row.profile.get("gpu") or preset["gpu"])
                computed = stored_comparison(rows, gpu, row.profile, row.report)
            except SpecError as exc:
                raise InvalidInputError.for_field("measurements", exc.message) from exc
            self.calibrations.store_comparison(row, computed)
        return CalibrationDetail(**to_read(row).model_dump(), comparison=row.comparison or {})

    def list_calibrations(self, slug: str) -> list[CalibrationRead]:
        self.cluster(slug)
        return [to_read(r) for r in self.calibrations.list(slug)]

    # --- deleting (a deleted cluster's rows would be detached: app/calibration/detached.py) ----
    def delete_measurements(self, slug: str) -> None:
        """Delete the cluster's measurements and its calibrations with them: a calibration
        whose rows are gone can be neither re-checked nor re-fitted."""
        self.cluster(slug)
        self.calibrations.delete_all(slug)
        self.measurements.delete_all(slug)

    def delete_cluster(self, slug: str, *, purge: bool) -> None:
        """Delete a user cluster; one with measurements or calibrations only when ``purge``
        says so (in the request's one unit of work), so that none is lost by accident."""
        if not self.catalog.get("cluster", slug).builtin:  # built-ins: the catalog's 409
            kept = self.measurements.count(slug), self.calibrations.count(slug)
            if any(kept) and not purge:
                raise ConflictError(
                    f"cluster {slug!r} has {kept[0]} measurement(s) and {kept[1]} "
                    f"calibration(s); send DELETE /v1/clusters/{slug}?purge=true to delete "
                    f"them with it, or DELETE /v1/clusters/{slug}/measurements first (GET "
                    f"/v1/clusters/{slug}/measurements to keep a copy)"
                )
            self.delete_measurements(slug)
        self.catalog.delete("cluster", slug)


def measurement_read(row: MeasurementRow) -> MeasurementRead:
    return MeasurementRead(id=row.id, source=row.source, data=row.data, created_at=row.created_at)


def to_read(row: CalibrationRow) -> CalibrationRead:
    return CalibrationRead(
        id=row.id,
        cluster=row.cluster_slug,
        num_measurements=row.num_measurements,
        profile=row.profile,
        report=row.report,
        created_at=row.created_at,
    )
