"""A request written as CLI flags, for the every-interface tests (memory settings, stack and
cluster description; their fixtures are in this folder's conftest)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.planning.schemas import EvaluationRequest
from app.sdk import PlannerClient

runner = CliRunner()


def flags(data: dict[str, Any]) -> list[str]:
    """The request as CLI flags: ``--x value``, lists comma-joined, ``--x`` / ``--no-x``."""
    out: list[str] = []
    for key, value in data.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else f"--no-{flag[2:]}")
        else:
            out += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return out


def evaluate_everywhere(
    client: TestClient,
    request: dict[str, Any],
    folder: Path,
    as_flags: dict[str, Any] | None = None,
) -> Any:
    """One evaluation through the API, the CLI flags, an ``--input`` line and the SDK; the four
    answers must be the same, and the API's is returned. ``as_flags``: the request as the CLI
    flags write it, where that differs (an inline model as a spec file)."""
    api = client.post("/v1/evaluations", json=request)
    assert api.status_code == 200, api.text
    from_api = api.json()
    result = runner.invoke(cli, ["evaluate", *flags(as_flags or request), "--json"])
    assert result.exit_code == 0, result.output
    from_flags = json.loads(result.stdout)
    lines = folder / "in.jsonl"
    lines.write_text(json.dumps(request) + "\n", encoding="utf-8")
    result = runner.invoke(cli, ["evaluate", "--input", str(lines), "--json"])
    from_input = json.loads(result.stdout)
    from_input.pop("line")
    with PlannerClient("http://testserver", transport=client._transport) as sdk:
        from_sdk = sdk.evaluate(EvaluationRequest.model_validate(request)).raw
    assert from_api == from_flags == from_input == from_sdk
    return from_api


def batch_rows(request: dict[str, Any], folder: Path) -> list[dict[str, str]]:
    """The output rows of ``planner batch`` on a one-job CSV of ``request`` (lists comma-joined,
    booleans as true/false)."""
    cells = {k: str(v).lower() if isinstance(v, bool) else v for k, v in request.items()}
    cells = {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in cells.items()}
    jobs = folder / "jobs.csv"
    with jobs.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["name", *cells])
        writer.writeheader()
        writer.writerow({"name": "job", **cells})
    out = folder / "out.csv"
    result = runner.invoke(cli, ["batch", str(jobs), "-o", str(out), "--workers", "1"])
    assert out.is_file(), result.output
    return list(csv.DictReader(out.open(encoding="utf-8")))
