"""A refused batch as ``planner batch --server`` shows it: ``POST /v1/batches`` validates every job
at submission and answers 422 naming each bad field ``jobs.N.field``; the CLI names each job by its
place in the jobs file and its name instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def refused_jobs(errors: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]]) -> str:
    """A 422 from ``POST /v1/batches`` (fields ``jobs.N.field``) as ``planner batch --server``
    shows it: each bad job by its place in the file (from 1) and its name, then the message."""
    lines = []
    for err in errors:
        field, message = str(err.get("field", "")), str(err.get("message", ""))
        parts = field.split(".", 2)
        if len(parts) < 2 or parts[0] != "jobs" or not parts[1].isdigit():
            lines.append(message)
            continue
        index = int(parts[1])
        name = jobs[index].get("name") if index < len(jobs) else None
        where = f"job {index + 1}" + (f" ({name})" if name else "")
        for prefix in (f"jobs.{index}: ", f"jobs.{index}."):  # the service's own wording
            message = message.removeprefix(prefix)
        lines.append(f"{where}: {message}")
    shown = "\n  ".join(dict.fromkeys(lines))
    return f"the service refused the batch (nothing was queued); fix these jobs:\n  {shown}"
