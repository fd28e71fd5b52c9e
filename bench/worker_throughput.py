"""Plans per minute through the service queue with 1, 2 and 4 ``planner worker`` processes, and
through the local ``planner batch`` (process pool on all cores).

Real plan jobs (app.planning): Llama-3.1-70B on 256 H100 with recompute and optimizer sharding
searched ("single", ~62k layouts enumerated, exhaustive), and the same over 3 GPU counts x 3 batch
sizes ("sweep", 9 scenarios, ~560k layouts). Jobs go in as one ``POST /v1/batches`` after the
workers are up; the clock stops when the batch has finished. PostgreSQL when
``PLANNER_TEST_POSTGRES_URL`` is set (a fresh database per run), else SQLite.

    .venv/bin/python bench/worker_throughput.py   # -> bench/results/worker_throughput.{json,md}
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PG = os.environ.get("PLANNER_TEST_POSTGRES_URL", "")
BASE = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "seq_length": 8192,
    "recompute": ["none", "selective", "full"],
    "optimizer_sharding": ["none", "optimizer", "full"],
}
WORKLOADS = {
    "single": ({**BASE, "num_gpus": 256}, 120),
    "sweep": (
        {
            **BASE,
            "num_gpus_options": [128, 256, 512],
            "global_batch_size_options": [512, 1024, 2048],
        },
        30,
    ),
}
WORKER_COUNTS = (1, 2, 4)


def jobs_of(workload: str) -> list[dict[str, Any]]:
    request, n = WORKLOADS[workload]
    out = []
    for i in range(n):
        job = {"name": f"{workload}-{i}", **request, "seed": i}
        if "num_gpus" in request:
            job["global_batch_size"] = 256 * (1 + i % 8)
        out.append(job)
    return out


def fresh_database(tmp: Path) -> str:
    if not PG:
        return f"sqlite:///{tmp}/bench-{uuid.uuid4().hex[:6]}.db"
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    url = make_url(PG)
    name = f"bench_{uuid.uuid4().hex[:8]}"
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    if not PG:
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    engine = create_engine(make_url(PG), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)'))
    engine.dispose()


def run_service(workers: int, workload: str, tmp: Path) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from app.core.settings import Settings
    from app.main import create_app

    url = fresh_database(tmp)
    settings = Settings(database_url=url, data_dir=tmp, workers=0)
    env = {
        **os.environ,
        "PLANNER_DATABASE_URL": url,
        "PLANNER_DATA_DIR": str(tmp),
        "PLANNER_JOB_POLL_S": "0.05",
    }
    logging.disable(logging.INFO)  # the API's access log is not what is measured
    with TestClient(create_app(settings)) as client:  # the API replica: migrates, seeds
        procs = []
        for i in range(workers):
            log = (tmp / f"w{workers}-{i}.log").open("w+b")
            procs.append(
                (
                    subprocess.Popen(
                        [sys.executable, "-m", "app.cli.worker", "--log-level", "info"],
                        env=env,
                        cwd=REPO,
                        stdout=subprocess.DEVNULL,
                        stderr=log,
                    ),
                    log,
                )
            )
        deadline = time.monotonic() + 60
        for _, log in procs:  # wait until each worker has started its threads
            while b"thread(s)" not in Path(log.name).read_bytes():
                assert time.monotonic() < deadline, "worker did not start"
                time.sleep(0.05)
        jobs = jobs_of(workload)
        t0 = time.perf_counter()
        batch = client.post("/v1/batches", json={"jobs": jobs}).json()
        while client.get(f"/v1/batches/{batch['id']}").json()["status"] != "finished":
            time.sleep(0.2)  # polling costs CPU that the workers share on this machine
        elapsed = time.perf_counter() - t0
        final = client.get(f"/v1/batches/{batch['id']}").json()
        for proc, log in procs:
            proc.terminate()
            proc.wait(30)
            log.close()
    drop_database(url)
    assert final["counts"]["succeeded"] == len(jobs), final["counts"]
    return {
        "mode": f"service, {workers} worker process{'es' if workers > 1 else ''}",
        "workload": workload,
        "workers": workers,
        "jobs": len(jobs),
        "elapsed_s": round(elapsed, 2),
        "plans_per_minute": round(len(jobs) / elapsed * 60, 1),
    }


def run_local(workload: str, tmp: Path) -> dict[str, Any]:
    jobs_file = tmp / f"{workload}.json"
    jobs_file.write_text(json.dumps(jobs_of(workload)))
    out = tmp / f"{workload}.csv"
    planner = str(Path(sys.executable).with_name("planner"))
    t0 = time.perf_counter()
    subprocess.run(
        [planner, "batch", str(jobs_file), "-o", str(out)], check=True, capture_output=True
    )
    elapsed = time.perf_counter() - t0
    n = len(jobs_of(workload))
    return {
        "mode": f"local planner batch ({os.cpu_count()} processes, start-up included)",
        "workload": workload,
        "workers": os.cpu_count(),
        "jobs": n,
        "elapsed_s": round(elapsed, 2),
        "plans_per_minute": round(n / elapsed * 60, 1),
    }


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for workload in WORKLOADS:
            for workers in WORKER_COUNTS:
                rows.append(run_service(workers, workload, tmp))
                print(rows[-1], file=sys.stderr)
            rows.append(run_local(workload, tmp))
            print(rows[-1], file=sys.stderr)
    meta = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, no GPU",
        "python": platform.python_version(),
        "database": "PostgreSQL 15 (local)" if PG else "SQLite",
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "workloads": {k: {"request": v[0], "jobs": v[1]} for k, v in WORKLOADS.items()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "worker_throughput.json").write_text(
        json.dumps({"meta": meta, "results": rows}, indent=1) + "\n"
    )
    lines = [
        "# Worker throughput (plans per minute)",
        "",
        f"Machine: {meta['machine']}; database: {meta['database']}; 1-minute load average "
        f"at start {meta['load_average_1m_at_start']} (other work shares the machine). "
        "Real plan jobs of "
        "Llama-3.1-70B on H100 (`single`: 256 GPUs, recompute and optimizer sharding searched; "
        "`sweep`: 3 GPU counts x 3 batch sizes). Service: one `POST /v1/batches` after the "
        "workers are up, until the batch has finished (polled every 0.2 s). Local: "
        "`planner batch` wall time, process start-up included.",
        "",
        "| workload | mode | jobs | seconds | plans/min |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['workload']} | {r['mode']} | {r['jobs']} | {r['elapsed_s']} | "
        f"{r['plans_per_minute']} |"
        for r in rows
    ]
    lines += [
        "",
        f"The machine has {os.cpu_count()} cores: beyond {os.cpu_count()} worker processes "
        "there is no CPU left to gain, so 4 workers measure contention, not scale. On a real "
        "deployment each worker gets its own cores (or machine) and plans/min grows with them "
        "until the database queue (one claim per job) becomes the limit.",
    ]
    (RESULTS / "worker_throughput.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))  # run as a script, bench/ is on the path, not the root
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.worker_throughput",
        __doc__,
        writes="bench/results/worker_throughput.{json,md}",
        runtime="about 2 minutes (8 timed runs of 5-15 s plus worker start-up)",
    )
    parser.parse_args()
    main()
