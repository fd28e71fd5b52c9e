"""Scale-out: ``planner worker`` processes share one PostgreSQL queue.

200 jobs run exactly once over 3 worker processes; a worker killed with SIGKILL mid-job loses
nothing (another worker re-queues and finishes its job); a fanned-out search is shared by two
workers through one Optuna study whose trials are disjoint and add up. The API replica runs with
``PLANNER_WORKERS=0``. Needs ``PLANNER_TEST_POSTGRES_URL`` (each test makes its own database).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.core.settings import Settings
from app.main import create_app

POSTGRES_URL = os.environ.get("PLANNER_TEST_POSTGRES_URL", "")
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason="set PLANNER_TEST_POSTGRES_URL"),
]
REPO = Path(__file__).resolve().parents[3]
LAUNCH = str(REPO / "tests" / "support" / "launch.py")

FAKE_RUNNER = """
import os, time

LOG = os.environ["FAKE_RUNNER_LOG"]


def _log(line):
    with open(LOG, "a") as handle:  # O_APPEND: one write per line, safe across processes
        handle.write(line + "\\n")


def plan_request(request, *, profile=None, progress=None):
    seed = request.get("seed", 0)
    _log(f"start {seed} {request['num_gpus']} {request['global_batch_size']} {os.getpid()}")
    steps = 60 if seed == 7 else 1
    for i in range(steps):
        if progress is not None:
            progress(i + 1, steps)
        time.sleep(float(os.environ.get("FAKE_RUNNER_SLEEP_S", "0.005")))
    n, b = request["num_gpus"], request["global_batch_size"]
    from tests.support.reports import plan_result_doc

    plans = [{"tp": 2 ** r, "dp": max(1, n // 2 ** r), "value": 1000.0 * n / (r + 1) + b}
             for r in range(3)]
    _log(f"done {seed} {n} {b} {os.getpid()}")
    return plan_result_doc(plans, evaluated=3, rejections={"memory": 1})
"""
REQUEST = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "seq_length": 8192,
    "global_batch_size": 128,
}


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new, empty PostgreSQL database of this test (dropped afterwards)."""
    admin_url = make_url(POSTGRES_URL)
    name = f"scale_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


class Cluster:
    """An API replica (TestClient, no in-process workers) and ``planner worker`` processes."""

    def __init__(self, url: str, tmp: Path, **env: str) -> None:
        (tmp / "fake_runner.py").write_text(FAKE_RUNNER)
        self.log = tmp / "runner.log"
        self.log.touch()
        self.env = {
            **os.environ,
            "PYTHONPATH": f"{tmp}{os.pathsep}{REPO}",
            "PLANNER_DATABASE_URL": url,
            "PLANNER_DATA_DIR": str(tmp),
            "PLANNER_JOB_POLL_S": "0.05",
            "PLANNER_JOB_HEARTBEAT_S": "0.2",
            "PLANNER_JOB_STALE_AFTER_S": "1.5",
            "FAKE_RUNNER_LOG": str(self.log),
            **env,
        }
        settings = Settings(database_url=url, data_dir=tmp, workers=0)
        self.client = TestClient(create_app(settings), raise_server_exceptions=False)
        self.client.__enter__()  # migrates and seeds the catalog
        self.workers: list[subprocess.Popen[bytes]] = []

    def start_workers(self, n: int) -> None:
        for _ in range(n):
            stderr = (self.log.parent / f"worker-{len(self.workers)}.log").open("wb")
            self.workers.append(
                subprocess.Popen(
                    [sys.executable, LAUNCH, "worker", "fake_runner:plan_request"],
                    env=self.env,
                    cwd=REPO,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                )
            )

    def lines(self, kind: str) -> list[list[str]]:
        rows = [line.split() for line in self.log.read_text().splitlines()]
        return [r[1:] for r in rows if r and r[0] == kind]

    def wait(self, done: Callable[[], bool], timeout_s: float, what: str) -> None:
        # timeouts only catch hangs: worker processes that import the app under pytest-xdist
        # on a busy 2-core machine take tens of seconds to start (60 s was missed there)
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)

    def close(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.workers:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.client.__exit__(None, None, None)


@pytest.fixture
def make_cluster(pg_url: str, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(**env: str) -> Cluster:
        cluster = Cluster(pg_url, tmp_path, **env)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


def _batch(client: TestClient, batch_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/batches/{batch_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_200_jobs_over_3_worker_processes_complete_exactly_once(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    jobs = [{"name": f"j{i}", **REQUEST, "seed": 1000 + i} for i in range(200)]
    submitted = cluster.client.post("/v1/batches", json={"jobs": jobs})
    assert submitted.status_code == 202, submitted.text
    batch_id = submitted.json()["id"]
    cluster.start_workers(3)
    cluster.wait(lambda: _batch(cluster.client, batch_id)["status"] == "finished", 180, "batch")

    batch = _batch(cluster.client, batch_id)
    assert batch["counts"]["succeeded"] == 200
    done = Counter(int(row[0]) for row in cluster.lines("done"))
    assert sorted(done) == [1000 + i for i in range(200)]
    assert set(done.values()) == {1}  # each job ran to completion exactly once
    assert len(cluster.lines("start")) == 200  # and was never even started twice
    assert len({row[3] for row in cluster.lines("done")}) >= 2  # the work was shared
    jobs_read = cluster.client.get("/v1/plan-jobs", params={"limit": 500}).json()["items"]
    assert {j["attempts"] for j in jobs_read} == {1}


def test_a_worker_killed_mid_job_loses_nothing(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(FAKE_RUNNER_SLEEP_S="0.05")
    slow = cluster.client.post("/v1/plan-jobs", json={**REQUEST, "seed": 7}).json()["id"]
    cluster.start_workers(2)

    def running() -> bool:
        job = cluster.client.get(f"/v1/plan-jobs/{slow}").json()
        return bool(job["status"] == "running" and job["layouts_evaluated"] >= 3)

    cluster.wait(running, 90, "the slow job to start")
    owner_pid = int(next(row for row in cluster.lines("start") if row[0] == "7")[3])
    victim = next(p for p in cluster.workers if p.pid == owner_pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    others = [
        cluster.client.post("/v1/plan-jobs", json={**REQUEST, "seed": 100 + i}).json()["id"]
        for i in range(5)
    ]

    def finished() -> bool:
        return all(
            cluster.client.get(f"/v1/plan-jobs/{j}").json()["status"] == "succeeded"
            for j in [slow, *others]
        )

    cluster.wait(finished, 120, "every job to succeed on the surviving worker")
    job = cluster.client.get(f"/v1/plan-jobs/{slow}").json()
    assert job["attempts"] == 2
    done = [row for row in cluster.lines("done") if row[0] == "7"]
    assert len(done) == 1 and int(done[0][3]) != owner_pid  # finished once, elsewhere
    assert len([row for row in cluster.lines("start") if row[0] == "7"]) == 2


def test_two_workers_share_one_optuna_study_with_disjoint_trials(
    make_cluster: Callable[..., Cluster], pg_url: str
) -> None:
    import optuna

    from app.planning.optuna_store import open_storage, storage_url, study_name

    cluster = make_cluster(PLANNER_FAN_OUT_MIN_SCENARIOS="2", FAKE_RUNNER_SLEEP_S="0.15")
    gpus, batches = [8, 16, 32, 64, 128, 256], [64, 128]
    body = {**REQUEST, "num_gpus_options": gpus, "global_batch_size_options": batches, "top_k": 4}
    body.pop("num_gpus")
    body.pop("global_batch_size")
    parent = cluster.client.post("/v1/plan-jobs", json=body).json()["id"]
    cluster.start_workers(2)

    def succeeded() -> bool:
        return bool(cluster.client.get(f"/v1/plan-jobs/{parent}").json()["status"] == "succeeded")

    cluster.wait(succeeded, 180, "the fanned-out job")
    parts = len(gpus) * len(batches)
    result = cluster.client.get(f"/v1/plan-jobs/{parent}/plans").json()
    assert result["search"]["parts"] == parts == result["search"]["parts_succeeded"]
    assert sorted((p["num_gpus"], p["global_batch_size"]) for p in result["parts"]) == sorted(
        (n, b) for n in gpus for b in batches
    )
    values = [p["objective"]["value"] for p in result["plans"]]
    every = [1000.0 * n / (r + 1) + b for n in gpus for b in batches for r in range(3)]
    assert values == sorted(every, reverse=True)[:4]  # the best of all parts, best first

    settings = Settings(database_url=pg_url, data_dir=Path("/nonexistent"))
    storage = open_storage(storage_url(settings))
    study = optuna.load_study(study_name=study_name(parent), storage=storage)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == parts * 3  # every part's 3 layouts, none twice
    by_part = Counter(t.user_attrs["job_id"] for t in trials)
    assert len(by_part) == parts and set(by_part.values()) == {3}
    by_worker = Counter(t.user_attrs["worker_id"].split(":")[1] for t in trials)
    assert len(by_worker) == 2  # both processes recorded trials ...
    assert sum(by_worker.values()) == len(trials)  # ... disjoint ones that add up
    owners = {t.user_attrs["job_id"]: t.user_attrs["worker_id"] for t in trials}
    assert all(t.user_attrs["worker_id"] == owners[t.user_attrs["job_id"]] for t in trials)
    assert len({t.number for t in trials}) == len(trials)
    ran = Counter((int(r[1]), int(r[2])) for r in cluster.lines("done"))
    assert set(ran.values()) == {1} and len(ran) == parts
    # the app's tables and Optuna's live apart: Optuna is in the schema "optuna"
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        schemas = dict(
            conn.execute(
                text(
                    "SELECT table_name, table_schema FROM information_schema.tables "
                    "WHERE table_name IN ('trials', 'plan_job')"
                )
            ).all()
        )
    engine.dispose()
    assert schemas == {"trials": "optuna", "plan_job": "public"}
