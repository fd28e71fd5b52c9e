"""A real ``planner serve`` (and ``planner worker``, where it exists) on a real database, with a
fake job runner (handed to the processes by tests/support/launch.py) that appends one line per
finished run to a file, so the fault tests can count how often each job ran to the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

PLANNER = str(Path(sys.executable).with_name("planner"))
REPO = str(Path(__file__).resolve().parents[2])
LAUNCH = str(Path(__file__).resolve().parents[1] / "support" / "launch.py")
RUNNER_REF = "fault_runner:plan_request"
RUNNER = """
import os, time

def plan_request(request, *, profile=None, progress=None):
    steps = 8
    for i in range(steps):
        if progress is not None:
            progress(i + 1, steps)
        time.sleep(0.05)
    line = f"{request['seed']} {os.getpid()}\\n".encode()
    fd = os.open(os.environ["FAULT_RUNS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    from tests.support.reports import plan_result_doc

    return plan_result_doc([{"tp": 8}], evaluated=steps)
"""
REQUEST = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "seq_length": 8192,
    "global_batch_size": 128,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def has_worker_command() -> bool:
    result = subprocess.run([PLANNER, "worker", "--help"], capture_output=True, timeout=60)
    return result.returncode == 0


class Service:
    """``planner serve`` (workers in-process) plus, optionally, ``planner worker`` processes."""

    def __init__(self, tmp: Path, database_url: str, **env: str) -> None:
        (tmp / "fault_runner.py").write_text(RUNNER)
        self.runs_file = tmp / "runs.txt"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            # the fake runner builds its result with tests.support.reports
            "PYTHONPATH": os.pathsep.join([str(tmp), REPO, os.environ.get("PYTHONPATH", "")]),
            "PLANNER_DATABASE_URL": database_url,
            "PLANNER_WORKERS": "2",
            "PLANNER_JOB_HEARTBEAT_S": "0.2",
            # 15 missed heartbeats: a worker starved of CPU on a loaded 2-core machine must not
            # look dead (a live worker whose job is re-claimed would run it to the end twice)
            "PLANNER_JOB_STALE_AFTER_S": "3",
            "PLANNER_JOB_POLL_S": "0.1",
            "PLANNER_RATE_LIMIT_PER_S": "0",
            "PLANNER_LOG_LEVEL": "warning",
            "FAULT_RUNS_FILE": str(self.runs_file),
            **env,
        }
        self.log = open(tmp / "server.log", "ab")  # noqa: SIM115
        self.server: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.killed_pids: set[int] = set()

    def start(self, timeout_s: float = 60) -> None:
        self.server = subprocess.Popen(
            [sys.executable, LAUNCH, "serve", RUNNER_REF, str(self.port)],
            env=self.env,
            stdout=self.log,
            stderr=self.log,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("planner serve did not become ready")

    def start_worker(self) -> None:
        env = {**self.env, "PLANNER_WORKERS": "1"}
        self.workers.append(
            subprocess.Popen(
                [sys.executable, LAUNCH, "worker", RUNNER_REF],
                env=env,
                stdout=self.log,
                stderr=self.log,
            )
        )

    def kill9(self) -> None:
        for proc in [self.server, *self.workers]:
            if proc is not None and proc.poll() is None:
                self.killed_pids.add(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.server = None
        self.workers = []

    def stop(self) -> None:
        for proc in [self.server, *self.workers]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.server = None
        self.workers = []
        self.log.close()

    def runs(self) -> dict[int, int]:
        return {seed: len(pids) for seed, pids in self.run_pids().items()}

    def run_pids(self) -> dict[int, list[int]]:
        """The pids that ran each job to its end, in the order they finished."""
        pids: dict[int, list[int]] = {}
        if self.runs_file.exists():
            for line in self.runs_file.read_text().splitlines():
                seed, pid = (int(word) for word in line.split()[:2])
                pids.setdefault(seed, []).append(pid)
        return pids

    def submit(self, seed: int, timeout_s: float = 30) -> str:
        """Submit (retrying through restarts; the Idempotency-Key makes retries one job)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                response = httpx.post(
                    f"{self.url}/v1/plan-jobs",
                    json={**REQUEST, "seed": seed},
                    headers={"Idempotency-Key": f"fault-{seed}"},
                    timeout=5,
                )
                if response.status_code in (200, 202):
                    return str(response.json()["id"])
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"could not submit job {seed}")
            time.sleep(0.1)

    def statuses(self) -> dict[str, Any]:
        page = httpx.get(f"{self.url}/v1/plan-jobs", params={"limit": 500}, timeout=5).json()
        return {job["id"]: job for job in page["items"]}

    def wait_all(self, ids: list[str], timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        jobs: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                jobs = self.statuses()
            except httpx.HTTPError:
                time.sleep(0.2)
                continue
            if all(
                jobs.get(i, {}).get("status") in ("succeeded", "failed", "cancelled") for i in ids
            ):
                return jobs
            time.sleep(0.2)
        return jobs
