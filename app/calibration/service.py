"""Measurements of a user's cluster (JSON rows, CSV, Megatron-LM logs) and calibrations on them.

Rows use the columns of ``shared/data/measured-throughput.csv``; a calibration fits a
performance profile for the cluster's GPU and stores it with its cross-validated error, and
later plan jobs on the cluster (request field ``cluster``) run with the newest one.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from sqlalchemy.orm import Session

from app.calibration.deps import CalibrationBackend
from app.calibration.models import CalibrationRow
from app.calibration.repository import CalibrationRepository, MeasurementRepository
from app.calibration.schemas import CalibrationRead, MeasurementRead
from app.catalog.service import CatalogService
from app.core.errors import ConflictError, InvalidInputError, UnsupportedMediaError
from planner.specs import SpecError

MAX_ROWS = 10_000
MAX_CELL = 4096
LOG_PARSE_BUDGET_S = 2.0
"""Longest a log upload may take to parse (a real 8 MB log takes well under a second)."""


def _clean_row(row: Any, index: int) -> dict[str, str]:
    if not isinstance(row, dict):
        raise InvalidInputError.for_field(f"rows.{index}", "each row must be an object")
    out: dict[str, str] = {}
    for key, value in row.items():
        if not isinstance(key, str) or not key or len(key) > 128:
            raise InvalidInputError.for_field(f"rows.{index}", f"bad column name {key!r}")
        if value is None:
            text = ""
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float | str):
            text = str(value)
        else:
            raise InvalidInputError.for_field(
                f"rows.{index}.{key}", "cells must be strings, numbers, booleans or null"
            )
        out[key] = text[:MAX_CELL]
    if not out:
        raise InvalidInputError.for_field(f"rows.{index}", "the row is empty")
    return out


def rows_from_body(
    body: bytes, content_type: str, *, gpu_type: str, gpus_per_node: int
) -> tuple[str, list[dict[str, str]]]:
    """(source, rows) from a JSON, CSV or Megatron-LM log body."""
    media = content_type.split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError.for_field("body", "the body is not UTF-8 text") from exc
    if "\x00" in text:  # PostgreSQL stores no NUL; the same 422 on SQLite (app/input_policy.py)
        raise InvalidInputError.for_field("body", "the body contains a NUL character; remove it")
    if media in ("application/json", ""):
        import json

        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise InvalidInputError.for_field("body", f"not JSON: {exc}") from exc
        if isinstance(data, dict) and "rows" in data:
            data = data["rows"]
        if not isinstance(data, list):
            raise InvalidInputError.for_field("body", 'send a JSON list of rows or {"rows": [...]}')
        source, raw = "json", data
    elif media == "text/csv":
        try:
            raw = list(csv.DictReader(io.StringIO(text)))
        except csv.Error as exc:
            raise InvalidInputError.for_field("body", f"not CSV: {exc}") from exc
        raw = [{k: v for k, v in r.items() if k is not None} for r in raw]
        source = "csv"
    elif media == "text/plain":
        from planner.megatron.log import LogParseError, parse_megatron_log

        try:
            parsed = parse_megatron_log(
                text,
                source_id="upload",
                gpu_type=gpu_type,
                gpus_per_node=gpus_per_node,
                time_budget_s=LOG_PARSE_BUDGET_S,
            )
            raw = list(parsed.to_measurement_rows())
        except (LogParseError, SpecError, ValueError) as exc:
            why = str(exc).removeprefix("not a Megatron-LM log: ")  # said once, not twice
            raise InvalidInputError.for_field("body", f"not a Megatron-LM log: {why}") from exc
        source = "log"
    else:
        raise UnsupportedMediaError(
            f"unsupported Content-Type {media!r}: use application/json, text/csv or text/plain"
        )
    if not raw:
        raise InvalidInputError.for_field("body", "no measurement rows in the body")
    if len(raw) > MAX_ROWS:
        raise InvalidInputError.for_field("body", f"at most {MAX_ROWS} rows per upload")
    return source, [_clean_row(r, i) for i, r in enumerate(raw)]


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

    def add_measurements(self, slug: str, body: bytes, content_type: str) -> tuple[int, int]:
        preset = self.cluster(slug)
        source, rows = rows_from_body(
            body, content_type, gpu_type=preset["gpu"], gpus_per_node=preset["gpus_per_node"]
        )
        for row in rows:  # rows of this cluster are about its GPU unless they say otherwise
            if not row.get("gpu_type"):
                row["gpu_type"] = preset["gpu"]
            if not row.get("gpus_per_node"):
                row["gpus_per_node"] = str(preset["gpus_per_node"])
        self._check_rows(rows)
        added = self.measurements.add_many(slug, source, rows)
        return added, len(self.measurements.list(slug))

    def _check_rows(self, rows: list[dict[str, str]]) -> None:
        """Reject rows the calibration could not use, naming the row and the column."""
        try:
            self.backend.check_measurements(rows)
        except SpecError as exc:
            raise InvalidInputError.for_field(exc.field or "rows", exc.message) from exc

    def list_measurements(self, slug: str) -> list[MeasurementRead]:
        self.cluster(slug)
        return [
            MeasurementRead(id=m.id, source=m.source, data=m.data, created_at=m.created_at)
            for m in self.measurements.list(slug)
        ]

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
        row = self.calibrations.add(
            CalibrationRow(
                cluster_slug=slug,
                num_measurements=len(rows),
                profile=profile,
                report=_report_dict(report),
            )
        )
        return to_read(row)

    def list_calibrations(self, slug: str) -> list[CalibrationRead]:
        self.cluster(slug)
        return [to_read(r) for r in self.calibrations.list(slug)]


def to_read(row: CalibrationRow) -> CalibrationRead:
    return CalibrationRead(
        id=row.id,
        cluster=row.cluster_slug,
        num_measurements=row.num_measurements,
        profile=row.profile,
        report=row.report,
        created_at=row.created_at,
    )
