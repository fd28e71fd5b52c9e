"""Fixtures of the service tests: an app on a fresh database with a small fake catalog and a
fake planning backend (the planner itself is tested in tests/planner; here we test the service).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app
from app.planning.backend import PlanningBackend
from planner.specs import SpecError
from tests.planner.fixtures import LLAMA_70B, SMALL_GPU
from tests.support.reports import layout_report_doc, plan_result_doc

LLAMA = LLAMA_70B
H100 = replace(SMALL_GPU, name="h100-sxm-80gb")
DGX = {
    "gpu": "h100-sxm-80gb",
    "gpus_per_node": 8,
    "inter_node_bandwidth_bytes_per_s": 50e9,
    "inter_node_latency_s": 5e-6,
    "intra_node_latency_s": 2e-6,
}
SLOW_SEED = 999
JOB_70B: dict[str, Any] = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "seq_length": 8192,
    "global_batch_size": 128,
}
"""A plan request the API tests share (copy it before changing it)."""
LAYOUT_70B: dict[str, Any] = {**JOB_70B, "tp": 8, "pp": 4}
"""An evaluation request: the same job with one layout."""
FAILING_SEED = 13


def fake_catalog() -> dict[str, dict[str, dict[str, Any]]]:
    return {
        "model": {"llama3.1-70b": LLAMA.to_dict()},
        "gpu": {"h100-sxm-80gb": H100.to_dict()},
        "cluster": {"dgx-h100": dict(DGX)},
    }


class FakePlanner:
    """Stands in for app.planning.compute: records calls; seed 999 is slow, seed 13 fails."""

    def __init__(self) -> None:
        self.plan_calls: list[dict[str, Any]] = []
        self.evaluate_calls: list[tuple[dict[str, Any], Any]] = []
        self.profiles: list[Any] = []
        self.lock = threading.Lock()

    def _model_name(self, ref: Any) -> str:
        if isinstance(ref, dict):
            return str(ref.get("name", "inline"))
        if ref != "llama3.1-70b":
            raise SpecError(f"unknown model {ref!r}", field="model")
        return str(ref)

    def evaluate(self, request: dict[str, Any], *, profile: Any = None) -> dict[str, Any]:
        name = self._model_name(request.get("model"))
        if request.get("gpu") not in ("h100-sxm-80gb", None) and not isinstance(
            request.get("gpu"), dict
        ):
            raise SpecError(f"unknown gpu {request.get('gpu')!r}", field="gpu")
        with self.lock:
            self.evaluate_calls.append((request, profile))
        gpu = request.get("gpu")
        return layout_report_doc(
            valid=request["num_gpus"] % (request.get("tp", 1) * request.get("pp", 1)) == 0,
            model=name,
            gpu=gpu if isinstance(gpu, str) else "inline",
            num_gpus=request["num_gpus"],
            **{k: request.get(k, 1) for k in ("tp", "pp", "cp")},
        )

    def plan(
        self,
        request: dict[str, Any],
        *,
        profile: Any = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        with self.lock:
            self.plan_calls.append(request)
            self.profiles.append(profile)
        steps = 200 if request.get("seed") == SLOW_SEED else 2
        for i in range(steps):
            if progress is not None:
                progress(i + 1, steps)
            if steps > 2:
                time.sleep(0.05)
        if request.get("seed") == FAILING_SEED:
            raise RuntimeError("the search exploded")
        return plan_result_doc(
            [{"tp": 8, "pp": 4}],
            model=self._model_name(request.get("model")),
            gpu=str(request.get("gpu")),
            rejections={"memory": 3},
        )

    def validate_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        self._model_name(request.get("model"))
        if not request.get("num_gpus") and not request.get("num_gpus_options"):
            raise SpecError("num_gpus (or num_gpus_options) is required", field="num_gpus")
        return {"gpu": H100.to_dict()}

    def backend(self) -> PlanningBackend:
        return PlanningBackend(
            evaluate=self.evaluate,
            plan=self.plan,
            validate_plan=self.validate_plan,
            load_profile=lambda data: data,
        )


def test_settings(database_url: str, data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": database_url,
        "workers": 1,
        "job_poll_s": 0.05,
        "job_heartbeat_s": 0.1,
        "job_stale_after_s": 30,
    }
    values.update(overrides)
    return Settings(**values)


test_settings.__test__ = False  # type: ignore[attr-defined]


@pytest.fixture
def planner_fake() -> FakePlanner:
    return FakePlanner()


@pytest.fixture
def make_app(
    database_url: str, tmp_path: Path, planner_fake: FakePlanner
) -> Callable[..., FastAPI]:
    """Build an app on this test's database, with the fake catalog and planner."""

    def make(**overrides: Any) -> FastAPI:
        settings = test_settings(database_url, tmp_path, **overrides)
        return create_app(settings, backend=planner_fake.backend(), catalog=fake_catalog)

    return make


@pytest.fixture
def make_client(make_app: Callable[..., FastAPI]) -> Iterator[Callable[..., TestClient]]:
    """Build (and start) a client of an app on this test's database."""
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        app = make_app(**overrides)
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


def wait_for_status(client: TestClient, job_id: str, statuses: set[str], timeout_s: float = 10):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/v1/plan-jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {job['status']} after {timeout_s} s")


@pytest.fixture
def wait_for() -> Callable[..., dict[str, Any]]:
    return wait_for_status
