"""A real ``planner serve`` process: a job that was running when the server was killed (-9) runs
again after a restart and completes; ``planner submit`` talks to the server through the SDK."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

PLANNER = str(Path(sys.executable).with_name("planner"))
REPO = str(Path(__file__).resolve().parents[3])
LAUNCH = str(Path(__file__).resolve().parents[2] / "support" / "launch.py")
SLOW_RUNNER = """
import time

def plan_request(request, *, profile=None, progress=None):
    steps = int(request.get("max_trials", 30))
    for i in range(steps):
        if progress is not None:
            progress(i + 1, steps)
        time.sleep(0.1)
    from tests.support.reports import plan_result_doc

    return plan_result_doc([{"tp": 8}], evaluated=steps)
"""
REQUEST = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "seq_length": 8192,
    "global_batch_size": 128,
    "max_trials": 40,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, tmp: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (tmp / "slow_runner.py").write_text(SLOW_RUNNER)
        self.env = {
            **os.environ,
            # the fake runner builds its result with tests.support.reports
            "PYTHONPATH": os.pathsep.join([str(tmp), REPO, os.environ.get("PYTHONPATH", "")]),
            "PLANNER_DATABASE_URL": f"sqlite:///{tmp}/planner.db",
            "PLANNER_JOB_HEARTBEAT_S": "0.2",
            "PLANNER_JOB_STALE_AFTER_S": "1.5",
            "PLANNER_JOB_POLL_S": "0.1",
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, LAUNCH, "serve", "slow_runner:plan_request", str(self.port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 180  # a hang detector: startup took 58 s under xdist
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("planner serve did not become ready")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    srv.start()
    yield srv
    srv.stop()


def _job(server: Server, job_id: str) -> dict:
    return httpx.get(f"{server.url}/v1/plan-jobs/{job_id}", timeout=5).json()


def test_job_running_when_server_is_killed_completes_after_restart(server: Server) -> None:
    job_id = httpx.post(f"{server.url}/v1/plan-jobs", json=REQUEST, timeout=10).json()["id"]
    deadline = time.monotonic() + 60
    while _job(server, job_id)["layouts_evaluated"] < 3:
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.1)
    server.kill()
    server.start()
    deadline = time.monotonic() + 120
    while (job := _job(server, job_id))["status"] != "succeeded":
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, f"job still {job['status']} after restart"
        time.sleep(0.2)
    assert job["attempts"] == 2
    plans = httpx.get(f"{server.url}/v1/plan-jobs/{job_id}/plans", timeout=5).json()
    assert plans["search"]["evaluated"] == 40


def test_planner_submit_waits_and_prints_plans(server: Server) -> None:
    out = subprocess.run(
        [
            PLANNER,
            "submit",
            "--server",
            server.url,
            "--model",
            "llama3.1-70b",
            "--gpu",
            "h100-sxm-80gb",
            "--num-gpus",
            "64",
            "--seq-length",
            "8192",
            "--global-batch-size",
            "128",
            "--max-trials",
            "3",
            "--tp",
            "2,4",
            "--wait",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=server.env,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["search"]["evaluated"] == 3


def test_planner_submit_reports_the_bad_field(server: Server) -> None:
    out = subprocess.run(
        [
            PLANNER,
            "submit",
            "--server",
            server.url,
            "--model",
            "no-such-model",
            "--gpu",
            "h100-sxm-80gb",
            "--num-gpus",
            "64",
            "--seq-length",
            "8192",
            "--global-batch-size",
            "128",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=server.env,
    )
    assert out.returncode == 2
    assert "model" in out.stderr
