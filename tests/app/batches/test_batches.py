"""``/v1/batches``: N plan jobs as one batch, a bad job failing alone, results as CSV/JSON with
the columns of the local ``planner batch``; and ``planner batch --server`` against a live server.
"""

from __future__ import annotations

import csv
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient

from app.batches.rows import OUTPUT_COLUMNS
from app.main import create_app
from tests.app.conftest import SLOW_SEED, FakePlanner, fake_catalog, test_settings
from tests.support.reports import plan_doc, plan_result_doc

GOOD = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "seq_length": 8192,
    "global_batch_size": 128,
}


def full_plan(rank: int, tp: int) -> dict[str, Any]:
    doc = plan_doc(
        tp=tp,
        pp=2,
        dp=64 // (2 * tp),
        memory={
            "total_bytes": 60e9,
            "breakdown": {"weights_bytes": 10e9, "optimizer_bytes": 20e9, "activations_bytes": 5e9},
        },
        command=f"torchrun pretrain_gpt.py --tensor-model-parallel-size {tp}",
    )
    doc["performance"].update(tokens_per_s_per_gpu=1000.0 / rank, mfu=0.5, step_time_s=2.0)
    return doc


class FullPlanner(FakePlanner):
    """The conftest fake, answering with complete plans (two ranks) as app.planning.compute does."""

    def plan(self, request: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        super().plan(request, **kwargs)
        result = plan_result_doc([])
        result["plans"] = [full_plan(1, 8), full_plan(2, 4)]
        return result


@pytest.fixture
def batch_client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(
        test_settings(database_url, tmp_path, workers=2),
        backend=FullPlanner().backend(),
        catalog=fake_catalog,
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def wait_finished(client: TestClient, batch_id: str, timeout_s: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        batch: dict[str, Any] = client.get(f"/v1/batches/{batch_id}").json()
        if batch["status"] == "finished":
            return batch
        assert time.monotonic() < deadline, batch
        time.sleep(0.05)


def test_batch_runs_every_job_and_a_bad_one_fails_alone(batch_client: TestClient) -> None:
    jobs = [
        {"name": "a", **GOOD},
        {"name": "bad", **GOOD, "model": "no-such-model"},
        {"name": "c", **GOOD, "num_gpus": 128},
    ]
    response = batch_client.post("/v1/batches", json={"jobs": jobs})
    assert response.status_code == 202
    assert response.headers["location"] == f"/v1/batches/{response.json()['id']}"
    batch = wait_finished(batch_client, response.json()["id"])
    assert batch["total"] == 3 and batch["progress"] == 1.0
    assert [j["name"] for j in batch["jobs"]] == ["a", "bad", "c"]
    assert [j["status"] for j in batch["jobs"]] == ["succeeded", "failed", "succeeded"]
    assert "no-such-model" in batch["jobs"][1]["error"]
    assert batch["counts"] == {
        "queued": 0,
        "running": 0,
        "succeeded": 2,
        "failed": 1,
        "cancelled": 0,
    }


def test_results_have_the_local_columns_in_csv_and_json(batch_client: TestClient) -> None:
    jobs = [{"name": "a", **GOOD}, {"name": "bad", **GOOD, "num_gpus": "many"}]
    batch_id = batch_client.post("/v1/batches", json={"jobs": jobs}).json()["id"]
    wait_finished(batch_client, batch_id)
    rows = batch_client.get(f"/v1/batches/{batch_id}/results?format=json").json()
    assert [(r["name"], r["rank"]) for r in rows] == [("a", 1), ("a", 2), ("bad", "")]
    assert rows[0]["tp"] == 8 and rows[1]["tp"] == 4
    assert rows[0]["memory_weights_optimizer_gib"] == round(30e9 / 2**30, 2)  # (10 + 20) GB
    assert rows[1]["tokens_per_s_per_gpu"] == 500.0
    assert "num_gpus" in rows[2]["error"]
    text = batch_client.get(f"/v1/batches/{batch_id}/results?format=csv")
    assert text.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(text.text)))
    assert tuple(table[0]) == OUTPUT_COLUMNS
    assert [r["name"] for r in table] == ["a", "a", "bad"]
    assert table[0]["megatron_command"].endswith("--tensor-model-parallel-size 8")


def test_results_of_an_unfinished_batch_are_a_conflict(batch_client: TestClient) -> None:
    jobs = [{"name": "slow", **GOOD, "seed": SLOW_SEED}]
    batch_id = batch_client.post("/v1/batches", json={"jobs": jobs}).json()["id"]
    response = batch_client.get(f"/v1/batches/{batch_id}/results")
    assert response.status_code == 409
    assert "still queued or running" in response.json()["detail"]
    partial = batch_client.get(f"/v1/batches/{batch_id}/results?partial=true").json()
    assert partial[0]["error"] in ("still queued", "still running")


def test_unknown_batch_is_404_and_empty_batch_is_422(batch_client: TestClient) -> None:
    assert batch_client.get("/v1/batches/nope").status_code == 404
    assert batch_client.post("/v1/batches", json={"jobs": []}).status_code == 422


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[str]:
    """A real HTTP server (uvicorn in a thread) with the fake planner, on SQLite."""
    app = create_app(
        test_settings(f"sqlite:///{tmp_path}/live.db", tmp_path),
        backend=FullPlanner().backend(),
        catalog=fake_catalog,
    )
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def run_cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from app.cli import cli

    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_batch_server_writes_the_same_rows(live_server: str, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        json.dumps([{"name": "a", **GOOD}, {"name": "bad", **GOOD, "model": "nope"}])
    )  # JSON is YAML
    out = tmp_path / "out.csv"
    code, _, err = run_cli("batch", str(jobs), "-o", str(out), "--server", live_server)
    assert code == 0, err
    assert "bad:" in err and "2 jobs: 1 planned, 0 infeasible (no layout fits), 1 failed" in err
    table = list(csv.DictReader(out.open()))
    assert [(r["name"], r["rank"]) for r in table] == [("a", "1"), ("a", "2"), ("bad", "")]
    out_json = tmp_path / "out.json"
    code, _, _ = run_cli("batch", str(jobs), "-o", str(out_json), "--server", live_server)
    rows = json.loads(out_json.read_text())
    assert code == 0 and rows[0]["tp"] == 8 and "nope" in rows[2]["error"]


def test_cli_batch_server_unreachable_fails_cleanly(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([GOOD]))
    url = f"http://127.0.0.1:{_free_port()}"
    code, _, err = run_cli("batch", str(jobs), "-o", str(tmp_path / "o.csv"), "--server", url)
    assert code == 2 and "cannot reach" in err
