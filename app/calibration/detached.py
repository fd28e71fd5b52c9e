"""Detached measurements and calibrations: rows whose cluster entry was deleted.

They belong to no cluster (a cluster created again under the same name starts empty), so no
fit, level or listing of a cluster reads them; an operator sees them here by the name they were
stored under, keeps a copy, and deletes them. Nothing deletes them implicitly.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.calibration.models import CalibrationRow, MeasurementRow
from app.calibration.repository import DetachedRepository
from app.calibration.schemas import (
    DetachedCluster,
    DetachedDeleted,
    DetachedList,
    DetachedRows,
)
from app.calibration.service import measurement_read, to_read
from app.core.errors import NotFoundError

ROUTE = "/v1/detached-measurements"


class DetachedService:
    def __init__(self, session: Session) -> None:
        self.repo = DetachedRepository(session)

    def list(self) -> DetachedList:
        measured = self.repo.summary(MeasurementRow)
        fitted = self.repo.summary(CalibrationRow)
        items = []
        for name in sorted(measured.keys() | fitted.keys()):
            found = [x for x in (measured.get(name), fitted.get(name)) if x is not None]
            items.append(
                DetachedCluster(
                    cluster=name,
                    measurements=measured.get(name, (0,))[0],
                    calibrations=fitted.get(name, (0,))[0],
                    first_stored_at=min(x[1] for x in found),
                    last_stored_at=max(x[2] for x in found),
                )
            )
        return DetachedList(items=items)

    def _missing(self, cluster: str) -> NotFoundError:
        return NotFoundError(f"no detached rows stored under {cluster!r}; GET {ROUTE} lists them")

    def get(self, cluster: str) -> DetachedRows:
        measurements = self.repo.rows(MeasurementRow, cluster)
        calibrations = self.repo.rows(CalibrationRow, cluster)
        if not measurements and not calibrations:
            raise self._missing(cluster)
        return DetachedRows(
            cluster=cluster,
            measurements=[measurement_read(m) for m in measurements],
            calibrations=[to_read(c) for c in reversed(calibrations)],  # newest first
        )

    def delete(self, cluster: str | None) -> DetachedDeleted:
        """Delete the detached rows of one former cluster name (404 if it has none), or all."""
        deleted = DetachedDeleted(
            calibrations=self.repo.delete(CalibrationRow, cluster),
            measurements=self.repo.delete(MeasurementRow, cluster),
        )
        if cluster is not None and not (deleted.measurements or deleted.calibrations):
            raise self._missing(cluster)
        return deleted
