"""The one calibrate request: measured runs (JSON rows, CSV text or Megatron-LM logs), the GPU
they ran on, and the fit's options, defined once and converted once into measurement rows.

``planner calibrate`` builds it from ``--measurements`` / ``--log`` files and flags,
``POST /v1/clusters/{slug}/measurements`` from its body (by Content-Type), and the web
calibration page from its upload. :func:`measurement_rows` turns it into the rows of
``shared/data/measured-throughput.csv`` that the fit reads; a bad part raises
:class:`planner.specs.SpecError` naming the request field (``rows.3.tp``, ``logs.0``, ``gpu``).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from app.core.messages import problem_fields
from app.core.schemas import RequestModel
from planner.calibration.columns import column_problem
from planner.calibration.measurements import (
    NUMBER_COLUMNS,
    NUMBER_EXAMPLES,
    WHOLE_NUMBER_COLUMNS,
    cell_problem,
)
from planner.specs import SpecError

MAX_ROWS = 10_000
MAX_CELL = 4096
LOG_PARSE_BUDGET_S = 2.0
"""Longest a log upload may take to parse (a real 8 MB log takes well under a second)."""
Cell = str | int | float | bool | None


class NamedText(RequestModel):
    """An uploaded file's text and the name its rows are traced back to."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="upload", min_length=1, max_length=200)
    text: str


class CalibrateRequest(RequestModel):
    """Measured runs to fit a performance profile to, and how to fit it."""

    model_config = ConfigDict(extra="forbid")

    rows: list[dict[str, Cell]] = Field(default_factory=list, max_length=MAX_ROWS)
    """Rows with the columns of shared/data/measured-throughput.csv."""
    csv: list[NamedText] = Field(default_factory=list, max_length=64)
    """CSV files with those columns."""
    logs: list[NamedText] = Field(default_factory=list, max_length=64)
    """Megatron-LM training logs (stdout)."""
    gpu: str | None = Field(default=None, max_length=128)
    """GPU of rows that do not name one (``gpu_type``); needed for a log, which never does."""
    gpus_per_node: int | None = Field(default=None, ge=1, le=1024)
    group_by: Literal["source", "sweep"] = "sweep"
    """Cross-validation groups: one measurement source, or one sweep, held out at a time."""

    @model_validator(mode="after")
    def _some_runs(self) -> CalibrateRequest:
        if not (self.rows or self.csv or self.logs):
            raise ValueError("give measured runs: rows, a CSV file or a Megatron-LM log")
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasurementRows:
    """A calibrate request's runs as the fit reads them."""

    source: str
    """json, csv, log, or mixed."""
    rows: list[dict[str, str]]


def from_body(body: bytes, content_type: str, **options: Any) -> CalibrateRequest:
    """An upload (JSON rows, ``text/csv`` or a ``text/plain`` Megatron log) as the request."""
    media = content_type.split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError("the body is not UTF-8 text", field="body") from exc
    if "\x00" in text:  # PostgreSQL stores no NUL; the same 422 on SQLite (app/input_policy.py)
        raise SpecError("the body contains a NUL character; remove it", field="body")
    if not text.strip():  # said as such, not as a JSON syntax error or missing CSV columns
        raise SpecError(
            "the body is empty: send JSON rows, a CSV file (Content-Type: text/csv) or a "
            "Megatron-LM log (text/plain)",
            field="body",
        )
    if media in ("application/json", ""):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise SpecError(f"not JSON: {exc}", field="body") from exc
        if isinstance(data, dict) and set(data) - {"rows"}:  # the whole request, as JSON
            return parse({**options, **data})
        if isinstance(data, dict):
            data = data["rows"]
        if not isinstance(data, list):
            raise SpecError('send a JSON list of rows or {"rows": [...]}', field="body")
        if len(data) > MAX_ROWS:
            raise SpecError(f"at most {MAX_ROWS} rows per upload", field="body")
        for i, row in enumerate(data):
            _check_row(row, f"rows.{i}")
        return parse({**options, "rows": data})
    if media == "text/csv":
        return parse({**options, "csv": [{"text": text}]})
    if media == "text/plain":
        return parse({**options, "logs": [{"text": text}]})
    raise UnsupportedMedia(
        f"unsupported Content-Type {media!r}: use application/json, text/csv or text/plain"
    )


def parse(data: Any, label: Callable[[str], str] | None = None) -> CalibrateRequest:
    """``data`` as the request; SpecError naming the first bad field (``label`` words it as the
    user typed it: a CLI flag)."""
    try:
        return CalibrateRequest.model_validate(data)
    except ValidationError as exc:
        first = problem_fields(list(exc.errors()), label)[0]
        raise SpecError(first["message"], field=first["field"]) from None


def body_field(field: str | None) -> str:
    """A request field as an upload names it: the log or the CSV is the ``body``, a CSV line is
    a row (``csv.0.3.tp`` -> ``rows.3.tp``)."""
    parts = (field or "body").split(".")
    if parts[0] == "logs" or (parts[0] == "csv" and len(parts) < 3):
        return "body"
    if parts[0] == "csv":
        return ".".join(["rows", *parts[2:]])
    return ".".join(parts)


class UnsupportedMedia(SpecError):
    """An upload whose Content-Type is none of JSON, CSV or a plain-text log (HTTP 415)."""


def measurement_rows(req: CalibrateRequest) -> MeasurementRows:
    """The request's runs as rows of text cells; rows without ``gpu_type`` or
    ``gpus_per_node`` take the request's ``gpu`` and ``gpus_per_node``."""
    rows: list[dict[str, str]] = []
    sources: set[str] = set()
    for i, row in enumerate(req.rows):
        label = f"row {row['row_id']!r}" if isinstance(row.get("row_id"), str) else f"row {i + 1}"
        _check_columns(req, row, label, f"rows.{i}", named_in="its keys")  # as a CSV header
        rows.append(_clean_row(row, f"rows.{i}"))
        sources.add("json")
    for i, item in enumerate(req.csv):
        try:
            parsed = list(csv.DictReader(io.StringIO(item.text)))
        except csv.Error as exc:
            raise SpecError(f"{item.name}: not CSV: {exc}", field=f"csv.{i}") from exc
        _check_header(req, item, f"csv.{i}")
        rows += [
            _clean_row({k: v for k, v in r.items() if k is not None}, f"csv.{i}.{n}")
            for n, r in enumerate(parsed)
        ]
        sources.add("csv")
    for i, item in enumerate(req.logs):
        rows += _log_rows(req, item, f"logs.{i}")
        sources.add("log")
    if not rows:
        raise SpecError("no measurement rows in the request", field="rows")
    if len(rows) > MAX_ROWS:
        raise SpecError(f"at most {MAX_ROWS} rows per request", field="rows")
    for cells in rows:  # rows are about the request's GPU unless they say otherwise
        if req.gpu and not cells.get("gpu_type"):
            cells["gpu_type"] = req.gpu
        if req.gpus_per_node and not cells.get("gpus_per_node"):
            cells["gpus_per_node"] = str(req.gpus_per_node)
    return MeasurementRows(source=sources.pop() if len(sources) == 1 else "mixed", rows=rows)


def _check_header(req: CalibrateRequest, item: NamedText, field: str) -> None:
    """A CSV without a required column is refused naming those and its unknown columns (not
    with the first row's first gap)."""
    header = next(csv.reader(io.StringIO(item.text)), [])
    _check_columns(req, header, item.name, field)


def _check_columns(
    req: CalibrateRequest, columns: Iterable[str], label: str, field: str, *, named_in: str = ""
) -> None:
    """The one column check of a CSV header and of a JSON row's keys (the request's ``gpu`` and
    ``gpus_per_node`` supply those columns)."""
    given = [name for name, value in (("gpu_type", req.gpu), ("gpus_per_node", req.gpus_per_node))
             if value]  # fmt: skip
    problem = column_problem(columns, given=given, named_in=named_in or "the header line")
    if problem:
        raise SpecError(f"{label} {problem}", field=field)


def _log_rows(req: CalibrateRequest, item: NamedText, field: str) -> list[dict[str, str]]:
    from planner.megatron.log import LogParseError, parse_megatron_log

    if req.gpu is None:
        raise SpecError("a Megatron-LM log does not name its GPU: give the gpu", field="gpu")
    try:
        parsed = parse_megatron_log(
            item.text,
            source_id=item.name,
            gpu_type=req.gpu,
            gpus_per_node=req.gpus_per_node,
            time_budget_s=LOG_PARSE_BUDGET_S,
        )
        found = list(parsed.to_measurement_rows())
    except (LogParseError, ValueError) as exc:  # SpecError is a ValueError too
        why = str(exc).removeprefix("not a Megatron-LM log: ")  # said once, not twice
        raise SpecError(f"{item.name}: not a Megatron-LM log: {why}", field=field) from exc
    return [_clean_row(r, f"{field}.{n}") for n, r in enumerate(found)]


def _check_row(row: Any, field: str) -> None:
    if not isinstance(row, dict):
        raise SpecError("each row must be an object", field=field)
    for key, value in row.items():
        if not isinstance(key, str) or not key or len(key) > 128:
            raise SpecError(f"bad column name {key!r}", field=field)
        if value is not None and not isinstance(value, bool | int | float | str):
            raise SpecError("cells must be strings, numbers, booleans or null", field=field)


def _check_not_a_number(key: str, value: bool, row: dict[str, Any], field: str) -> None:
    """A JSON true/false in a numeric column is a clash of types, not a value to coerce."""
    kind = "a whole number such as 8" if key in WHOLE_NUMBER_COLUMNS else None
    if key in NUMBER_COLUMNS:
        kind = NUMBER_EXAMPLES.get(key, "a number such as 0.8")
    if kind is None:
        return
    name = f"row {row['row_id']!r}" if isinstance(row.get("row_id"), str) else "this row"
    raise SpecError(
        f"{key} of {name} must be {kind}, not {str(value).lower()}: send the number, "
        "or leave it out",
        field=field,
    )


def _clean_row(row: dict[str, Any], field: str) -> dict[str, str]:
    _check_row(row, field)
    out: dict[str, str] = {}
    for key, value in row.items():
        if value is None:
            text = ""
        elif isinstance(value, bool):
            _check_not_a_number(key, value, row, f"{field}.{key}")
            text = "true" if value else "false"
        else:
            text = str(value)
            if (problem := cell_problem(key, text)) is not None:  # '1_0', '٨', 'inf'
                row_id = row.get("row_id")
                name = row_id if isinstance(row_id, str) and row_id else _position(field)
                raise SpecError(f"{name}: {problem}", field=f"{field}.{key}")
        out[key] = text[:MAX_CELL]
    if not out:
        raise SpecError("the row is empty", field=field)
    return out


def _position(field: str) -> str:
    """'row 4' for the field ``rows.3`` / ``csv.0.3`` (as :func:`parse_rows` names a row)."""
    last = field.rsplit(".", 1)[-1]
    return f"row {int(last) + 1}" if last.isdigit() else "the row"
