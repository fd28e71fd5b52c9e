"""Fault suite: kill -9 the server (and ``planner worker`` processes) at random points of a
stream of jobs; stop PostgreSQL for 10 s. Zero jobs lost, none run to the end twice."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tests.faults.conftest import Service, has_worker_command

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
PG_ADMIN_URL = "postgresql+psycopg://postgres:postgres@127.0.0.1:5432/"
NUM_JOBS = 16


def _assert_each_job_ran_once(service: Service, ids: dict[int, str], timeout_s: float) -> None:
    jobs = service.wait_all(list(ids.values()), timeout_s)
    statuses = {seed: jobs.get(job_id, {}).get("status") for seed, job_id in ids.items()}
    unfinished = {seed: s for seed, s in statuses.items() if s != "succeeded"}
    assert not unfinished, f"jobs lost or failed: {unfinished}"
    runs = service.run_pids()
    assert sorted(runs) == sorted(ids), f"jobs never run: {sorted(set(ids) - set(runs))}"
    # A run whose process was killed after the work and before its result was committed is
    # re-run after the restart (at-least-once: the runner's file write is outside the database
    # transaction). Any other repeat (two live processes, or one process twice) is a defect.
    twice = {
        seed: pids
        for seed, pids in runs.items()
        if len(pids) != 1 and any(pid not in service.killed_pids for pid in pids[:-1])
    }
    assert not twice, f"jobs run to the end more than once by live processes: {twice}"


def test_kill_9_at_random_points_loses_no_job_and_repeats_only_killed_runs(tmp_path: Path) -> None:
    service = Service(tmp_path, f"sqlite:///{tmp_path}/planner.db")
    with_workers = has_worker_command()
    rng = random.Random(7)
    ids: dict[int, str] = {}
    try:
        service.start()
        if with_workers:
            service.start_worker()

        def stream() -> None:  # jobs keep arriving while the processes die
            for seed in range(1, NUM_JOBS + 1):
                ids[seed] = service.submit(seed, timeout_s=60)
                time.sleep(rng.uniform(0.0, 0.2))

        submitter = threading.Thread(target=stream)
        submitter.start()
        for _ in range(3):
            time.sleep(rng.uniform(0.3, 1.2))
            service.kill9()
            service.start()
            if with_workers:
                service.start_worker()
        submitter.join(90)
        assert len(ids) == NUM_JOBS
        _assert_each_job_ran_once(service, ids, timeout_s=60)
    finally:
        service.stop()


def _postgres_cluster() -> bool:
    return (
        hasattr(os, "geteuid")
        and os.geteuid() == 0
        and shutil.which("pg_ctlcluster") is not None
        and Path("/etc/postgresql/15/main").is_dir()
    )


def _postgres_unreachable(url: str = PG_ADMIN_URL + "postgres") -> str | None:
    """Why the suite cannot use PostgreSQL at ``url`` (None when it answers): the cluster may
    exist but be stopped, or listen elsewhere, or refuse the postgres:postgres login."""
    engine = create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except OperationalError as exc:
        first = str(exc.orig or exc).strip().splitlines()[0]
        return (
            f"no PostgreSQL answering as postgres:postgres at {url.rsplit('@', 1)[-1]} "
            f"({first}); start it as .ci/run does"
        )
    finally:
        engine.dispose()
    return None


@pytest.mark.postgres_server
@pytest.mark.skipif(
    not _postgres_cluster(), reason="needs root and the PostgreSQL 15 'main' cluster"
)
def test_postgres_down_for_10_s_loses_no_job_and_runs_none_twice(tmp_path: Path) -> None:
    reason = _postgres_unreachable()
    if reason is not None:  # the cluster exists but nothing answers on 5432: not this test's fault
        pytest.skip(reason)
    name = f"planner_faults_{os.getpid()}"
    admin = create_engine(PG_ADMIN_URL + "postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    service = Service(
        tmp_path,
        PG_ADMIN_URL + name,
        PLANNER_JOB_HEARTBEAT_S="0.5",
        PLANNER_JOB_STALE_AFTER_S="5",
    )
    ids: dict[int, str] = {}
    stopped = False
    try:
        service.start()
        for seed in range(1, NUM_JOBS + 1):
            ids[seed] = service.submit(seed)
        time.sleep(0.5)
        subprocess.run(["pg_ctlcluster", "15", "main", "stop", "-m", "fast"], check=True)
        stopped = True
        time.sleep(10)
        subprocess.run(["pg_ctlcluster", "15", "main", "start"], check=True)
        stopped = False
        _assert_each_job_ran_once(service, ids, timeout_s=60)
    finally:
        if stopped:
            subprocess.run(["pg_ctlcluster", "15", "main", "start"], check=False)
        service.stop()
        admin = create_engine(PG_ADMIN_URL + "postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
