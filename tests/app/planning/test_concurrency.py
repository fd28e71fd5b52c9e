"""Parallel submissions against a real uvicorn server: every job stored exactly once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn

from tests.app.conftest import JOB_70B

pytestmark = pytest.mark.slow

PLAN = dict(JOB_70B)


@pytest.fixture
def base_url(make_app) -> Iterator[str]:
    app = make_app(workers=2, rate_limit_per_s=0)  # 50 plan jobs cost 500: over the burst
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
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


def _submit(base_url: str, body: dict, key: str) -> httpx.Response:
    return httpx.post(
        f"{base_url}/v1/plan-jobs", json=body, headers={"Idempotency-Key": key}, timeout=60
    )


def test_fifty_parallel_submissions_are_fifty_jobs(base_url: str) -> None:
    with ThreadPoolExecutor(16) as pool:
        responses = list(
            pool.map(lambda i: _submit(base_url, {**PLAN, "seed": i}, f"key-{i}"), range(50))
        )
    assert [r.status_code for r in responses] == [202] * 50
    ids = {r.json()["id"] for r in responses}
    page = httpx.get(f"{base_url}/v1/plan-jobs?limit=500", timeout=10).json()
    assert len(ids) == 50 and page["total"] == 50
    assert {item["id"] for item in page["items"]} == ids


def test_ten_parallel_submissions_with_one_key_are_one_job(base_url: str) -> None:
    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(lambda _: _submit(base_url, PLAN, "same-key"), range(10)))
    assert {r.status_code for r in responses} <= {200, 202}
    assert len({r.json()["id"] for r in responses}) == 1
    assert httpx.get(f"{base_url}/v1/plan-jobs", timeout=10).json()["total"] == 1
