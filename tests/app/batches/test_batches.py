"""``/v1/batches``: N plan jobs as one batch, a bad job refusing it whole (422, nothing stored),
a job failing at run time failing alone, results as CSV/JSON with the columns of the local
``planner batch``; and ``planner batch --server`` against a live server.
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
from tests.app.conftest import FAILING_SEED, SLOW_SEED, FakePlanner, fake_catalog, test_settings
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


def test_batch_runs_every_job_and_one_failing_at_run_time_fails_alone(
    batch_client: TestClient,
) -> None:
    jobs = [
        {"name": "a", **GOOD},
        {"name": "boom", **GOOD, "seed": FAILING_SEED},
        {"name": "c", **GOOD, "num_gpus": 128},
    ]
    response = batch_client.post("/v1/batches", json={"jobs": jobs})
    assert response.status_code == 202
    assert response.headers["location"] == f"/v1/batches/{response.json()['id']}"
    batch = wait_finished(batch_client, response.json()["id"])
    assert batch["total"] == 3 and batch["progress"] == 1.0
    assert [j["name"] for j in batch["jobs"]] == ["a", "boom", "c"]
    assert [j["status"] for j in batch["jobs"]] == ["succeeded", "failed", "succeeded"]
    assert "the search exploded" in batch["jobs"][1]["error"]
    assert batch["counts"] == {
        "queued": 0,
        "running": 0,
        "succeeded": 2,
        "failed": 1,
        "cancelled": 0,
    }


def _nothing_stored(client: TestClient) -> None:
    assert client.get("/v1/batches").json()["total"] == 0
    assert client.get("/v1/plan-jobs").json()["total"] == 0


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        ({"seq_length": "8k"}, "jobs.1.seq_length", "a number is expected"),
        ({"seq_length": -1}, "jobs.1.seq_length", "greater than"),
        ({"num_gpus": [64, 128]}, "jobs.1.num_gpus", "num_gpus_options"),
        ({"tensor_model_parallel_size": 8}, "jobs.1.tensor_model_parallel_size", "is tp here"),
        ({"model": "no-such-model"}, "jobs.1.model", "unknown model 'no-such-model'"),
    ],
)
def test_a_bad_job_refuses_the_whole_batch_naming_its_field(
    batch_client: TestClient, bad: dict[str, Any], field: str, words: str
) -> None:
    """The single-plan request's checks, at submission: 422 naming ``jobs.N.field`` (as FastAPI
    names a field of a body), and not one job or batch stored (they used to fail later)."""
    jobs = [{"name": "a", **GOOD}, {"name": "bad", **GOOD, **bad}]
    response = batch_client.post("/v1/batches", json={"jobs": jobs})
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [e["field"] for e in errors] == [field]
    assert words in errors[0]["message"] and words in response.json()["detail"]
    _nothing_stored(batch_client)


def test_every_bad_job_is_named_at_once(batch_client: TestClient) -> None:
    missing = {k: v for k, v in GOOD.items() if k != "model"}
    jobs = [{"name": "a", **missing}, {"name": "b", **GOOD}, {"name": "c", **GOOD, "top_k": 0}]
    response = batch_client.post("/v1/batches", json={"jobs": jobs})
    assert response.status_code == 422
    fields = [e["field"] for e in response.json()["errors"]]
    assert fields == ["jobs.0.model", "jobs.2.top_k"]
    assert "jobs.0.model is required" in response.json()["detail"]
    _nothing_stored(batch_client)


def test_unknown_models_in_two_jobs_are_both_named(batch_client: TestClient) -> None:
    jobs = [{**GOOD, "model": "nope"}, {**GOOD}, {**GOOD, "model": "nada"}]
    response = batch_client.post("/v1/batches", json={"jobs": jobs})
    assert response.status_code == 422
    problem = response.json()
    assert [e["field"] for e in problem["errors"]] == ["jobs.0.model", "jobs.2.model"]
    assert problem["detail"].startswith("2 of 3 jobs cannot be planned")
    _nothing_stored(batch_client)


def test_results_have_the_local_columns_in_csv_and_json(batch_client: TestClient) -> None:
    jobs = [{"name": "a", **GOOD}, {"name": "boom", **GOOD, "seed": FAILING_SEED}]
    batch_id = batch_client.post("/v1/batches", json={"jobs": jobs}).json()["id"]
    wait_finished(batch_client, batch_id)
    rows = batch_client.get(f"/v1/batches/{batch_id}/results?format=json").json()
    assert [(r["name"], r["rank"]) for r in rows] == [("a", 1), ("a", 2), ("boom", "")]
    assert rows[0]["tp"] == 8 and rows[1]["tp"] == 4
    assert rows[0]["memory_weights_optimizer_gib"] == round(30e9 / 2**30, 2)  # (10 + 20) GB
    assert rows[1]["tokens_per_s_per_gpu"] == 500.0
    assert "the search exploded" in rows[2]["error"]
    text = batch_client.get(f"/v1/batches/{batch_id}/results?format=csv")
    assert text.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(text.text)))
    assert tuple(table[0]) == OUTPUT_COLUMNS
    assert [r["name"] for r in table] == ["a", "a", "boom"]
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
        json.dumps([{"name": "a", **GOOD}, {"name": "boom", **GOOD, "seed": FAILING_SEED}])
    )  # JSON is YAML
    out = tmp_path / "out.csv"
    code, _, err = run_cli("batch", str(jobs), "-o", str(out), "--server", live_server)
    assert code == 0, err
    assert "boom:" in err and "2 jobs: 1 planned, 0 infeasible (no layout fits), 1 failed" in err
    table = list(csv.DictReader(out.open()))
    assert [(r["name"], r["rank"]) for r in table] == [("a", "1"), ("a", "2"), ("boom", "")]
    out_json = tmp_path / "out.json"
    code, _, _ = run_cli("batch", str(jobs), "-o", str(out_json), "--server", live_server)
    rows = json.loads(out_json.read_text())
    assert code == 0 and rows[0]["tp"] == 8 and "exploded" in rows[2]["error"]


def test_cli_batch_server_names_the_jobs_it_refused(live_server: str, tmp_path: Path) -> None:
    """The service's 422 for a batch, as the CLI shows it: each bad job by its place in the
    file and its name, with the field; exit 2 and no output file (nothing was queued)."""
    jobs = tmp_path / "jobs.csv"
    header = "name,model,gpu,num_gpus,seq_length,global_batch_size\n"
    rows = ["a,llama3.1-70b,h100-sxm-80gb,64,8192,128", "b,nope,h100-sxm-80gb,64,8192,128"]
    rows.append("c,llama3.1-70b,h100-sxm-80gb,64,8k,128")
    jobs.write_text(header + "\n".join(rows) + "\n")
    out = tmp_path / "out.csv"
    code, _, err = run_cli("batch", str(jobs), "-o", str(out), "--server", live_server)
    assert code == 2, err
    assert "refused the batch (nothing was queued)" in err
    assert "job 3 (c): seq_length: got the text '8k': a number is expected" in err
    assert not out.exists()


def test_cli_batch_server_unreachable_fails_cleanly(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([GOOD]))
    url = f"http://127.0.0.1:{_free_port()}"
    code, _, err = run_cli("batch", str(jobs), "-o", str(tmp_path / "o.csv"), "--server", url)
    assert code == 2 and "cannot reach" in err


def test_the_sdk_raises_the_refusal_with_its_fields(batch_client: TestClient) -> None:
    from app.sdk import PlannerAPIError, PlannerClient

    jobs = [{"name": "a", **GOOD}, {"name": "b", **GOOD, "seq_length": "8k"}]
    with (
        PlannerClient("http://testserver", transport=batch_client._transport) as sdk,
        pytest.raises(PlannerAPIError) as caught,
    ):
        sdk.submit_batch(jobs)
    assert caught.value.status == 422
    assert [e["field"] for e in caught.value.errors] == ["jobs.1.seq_length"]
    assert "jobs.1.seq_length: got the text '8k': a number is expected" in str(caught.value)
