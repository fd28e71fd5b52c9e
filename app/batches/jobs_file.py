"""A jobs file (CSV, YAML or JSON) read into batch rows: the one reader of ``planner batch``
and of the web's batch page, and the one step from a row to the API's batch job.

A CSV has a header naming the columns (the plan request's fields, plus ``name``) and one job per
line; YAML/JSON is a list of job objects, or ``{"jobs": [...]}``. An output file of ``planner
batch`` reads back as the same jobs: its result columns are dropped and empty cells are unset.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.batches.rows import OUTPUT_COLUMNS, RESULT_COLUMNS
from planner import SpecError

FORMATS = {".csv": "csv", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}
"""The file name endings a jobs file may have, and how each is read."""
INT_COLUMNS = frozenset(
    (
        "num_gpus", "gpus_per_node", "seq_length", "global_batch_size", "top_k", "seed",
        "max_trials", "max_tp", "max_pp", "max_vpp", "max_cp", "max_ep", "max_micro_batch_size",
    )
)  # fmt: skip
"""CSV cells read as whole numbers when they are digits (the rest stay text for the request)."""
HOW = "a header line naming the columns (name, model, gpu, num_gpus, seq_length, ...), then one "
HOW += "line per job"


class JobsFileError(SpecError):
    """A jobs file that cannot be read as jobs at all (empty, not CSV/YAML, no header)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="jobs")


@dataclass(frozen=True, kw_only=True, slots=True)
class JobsFile:
    """The jobs of a file, in file order."""

    jobs: list[dict[str, Any]]
    """One raw job per row or object: cells as written (digits of INT_COLUMNS as ints)."""
    lines: list[int | None] = field(default_factory=list)
    """The line each job is on (CSV; None for YAML/JSON), so an error can point at it."""


def file_format(filename: str) -> str | None:
    """``csv``, ``yaml`` or ``json`` from the file's name; None for any other name."""
    dot = filename.rfind(".")
    return FORMATS.get(filename[dot:].lower()) if dot >= 0 else None


def guess_format(text: str) -> str:
    """Pasted text: YAML/JSON when its first line starts a list, an object or ``jobs:``."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            yaml_like = stripped[0] in "-[{" or stripped.startswith("jobs:")
            return "yaml" if yaml_like else "csv"
    return "csv"


def parse_jobs(text: str, fmt: str, *, source: str) -> JobsFile:
    """The jobs in ``text`` read as ``fmt``; JobsFileError naming ``source`` and how to fix it."""
    if fmt not in ("csv", "yaml", "json"):
        raise JobsFileError(f"{source}: use a .csv, .yaml, .yml or .json file")
    text = text.removeprefix("\ufeff")  # a spreadsheet's UTF-8 byte order mark
    if not text.strip():
        raise JobsFileError(f"{source} is empty: give {HOW}")
    if fmt == "csv":
        return _csv_jobs(text, source)
    import yaml

    try:
        data = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise JobsFileError(f"{source}: cannot parse: {exc}") from None
    if isinstance(data, dict) and "jobs" in data:
        data = data["jobs"]
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise JobsFileError(f"{source}: expected a list of job objects")
    if not data:
        raise JobsFileError(f"{source} has no jobs: give a list with one object per job")
    # an output read back: its result columns go, empty cells are unset
    jobs = [{k: v for k, v in x.items() if k not in RESULT_COLUMNS and v != ""} for x in data]
    return JobsFile(jobs=jobs, lines=[None] * len(jobs))


def _csv_jobs(text: str, source: str) -> JobsFile:
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in reader.fieldnames or [] if h]
    known = _known_columns()
    if not any(h in known for h in header):
        shown = ", ".join(header[:4]) + (", ..." if len(header) > 4 else "")
        raise JobsFileError(
            f"{source}: the first line ({shown}) names no job column; give {HOW} "
            "(or use a .yaml/.json file for YAML or JSON)"
        )
    jobs: list[dict[str, Any]] = []
    lines: list[int | None] = []
    for row in reader:
        extra = [v for v in row.get(None) or [] if v.strip()]  # cells past the header
        if extra:
            raise JobsFileError(
                f"{source} line {reader.line_num} has {len(header) + len(extra)} cells but the "
                f"header names {len(header)} columns: remove the extra cells or name their column"
            )
        job = {k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()}
        job = {k: v for k, v in job.items() if k not in RESULT_COLUMNS}  # an output read back
        for key in INT_COLUMNS & job.keys():
            if job[key].isascii() and job[key].isdigit():  # not "²": int() refuses it
                job[key] = int(job[key])
        jobs.append(job)
        lines.append(reader.line_num)
    if not jobs:
        raise JobsFileError(f"{source} has a header but no jobs: add one line per job")
    return JobsFile(jobs=jobs, lines=lines)


def _known_columns() -> set[str]:
    from app.batches.schemas import BatchJobCreate

    return set(BatchJobCreate.model_fields) | set(OUTPUT_COLUMNS)


def batch_job(row: Mapping[str, Any]) -> dict[str, Any]:
    """One row as the API's batch job: text lists and ranges ('1,2,4', '64-512', 'none,full')
    as lists, checked against the batch request (RequestError/SpecError naming the column)."""
    from app.batches.schemas import BatchJobCreate
    from app.planning.convert import column_label, expand_text_lists, parse_request

    data = expand_text_lists(row)
    parse_request(BatchJobCreate, data, label=column_label(row))
    return data
