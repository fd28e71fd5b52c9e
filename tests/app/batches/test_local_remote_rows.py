"""``planner batch`` writes the same rows run locally and through the service (``--server``,
the SDK): one jobs file with a feasible and an infeasible job, real planning on both sides.
The infeasible job's row had its stack columns (precision, attention_backend, moe_imbalance,
...) filled by the service, which stores the parsed request, and empty locally, where the row
came from the raw CSV cells: both rows now come from the job as the service stores it. A job
that cannot be planned (an unknown model) is an error row locally; the service refuses the
batch whole instead (422 naming the job), so nothing half-done is queued."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from tests.app.conftest import test_settings
from tests.app.live import live_server

JOBS = (
    "name,model,gpu,num_gpus,seq_length,global_batch_size,top_k\n"
    "fits,llama3.1-8b,h100-sxm-80gb,8,4096,64,2\n"
    "too-big,llama3.1-405b,h100-sxm-80gb,8,8192,64,2\n"
)
UNKNOWN = "unknown,llama9-1t,h100-sxm-80gb,8,4096,64,2\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """The service with the real planner (no fake backend), on SQLite."""
    app = create_app(test_settings(f"sqlite:///{tmp_path}/live.db", tmp_path))
    with live_server(app) as (host, port):
        yield f"http://{host}:{port}"


def _batch(*args: str) -> None:
    result = CliRunner().invoke(cli, ["batch", *args])
    assert result.exit_code == 0, result.stderr
    assert "1 planned, 1 infeasible (no layout fits), 0 failed" in result.stderr


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_local_and_service_rows_are_identical(server: str, tmp_path: Path, suffix: str) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS, encoding="utf-8")
    local, remote = tmp_path / f"local{suffix}", tmp_path / f"remote{suffix}"
    _batch(str(jobs), "-o", str(local), "--workers", "1")
    _batch(str(jobs), "-o", str(remote), "--server", server)
    if suffix == ".csv":
        rows = list(csv.DictReader(local.open(encoding="utf-8")))
    else:
        rows = json.loads(local.read_text(encoding="utf-8"))
    assert [r["name"] for r in rows] == ["fits", "fits", "too-big"]
    infeasible = rows[2]
    assert str(infeasible["error"]).startswith("no feasible layout")
    assert infeasible["precision"] == "bf16" and infeasible["attention_backend"] == "auto"
    assert local.read_text(encoding="utf-8") == remote.read_text(encoding="utf-8")


def test_an_unknown_model_is_a_row_locally_and_a_refusal_by_the_service(
    server: str, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS + UNKNOWN, encoding="utf-8")
    local = tmp_path / "local.csv"
    result = CliRunner().invoke(cli, ["batch", str(jobs), "-o", str(local), "--workers", "1"])
    assert "1 planned, 1 infeasible (no layout fits), 1 failed" in result.stderr
    assert "unknown model 'llama9-1t'" in list(csv.DictReader(local.open()))[-1]["error"]
    remote = tmp_path / "remote.csv"
    result = CliRunner().invoke(cli, ["batch", str(jobs), "-o", str(remote), "--server", server])
    assert result.exit_code == 2
    assert "job 3 (unknown): unknown model 'llama9-1t'" in result.stderr
    assert not remote.exists()
