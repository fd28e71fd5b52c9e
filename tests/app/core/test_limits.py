"""Limits: body size (413, counted as it arrives), rate limits (429 + Retry-After), bounds on
every number (422 naming the limit), the plan-job time budget."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.security.ratelimit import WeightedBuckets, request_cost
from tests.app.conftest import JOB_70B, SLOW_SEED
from tests.app.keys.test_auth import GOOD_SECRET, new_key

EVALUATION = dict(JOB_70B)
PLAN = {**EVALUATION, "seed": SLOW_SEED}


def test_declared_body_over_the_limit_is_413(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_body_bytes=4096)
    response = client.post(
        "/v1/evaluations",
        content=b"{" + b" " * 5000 + b"}",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert "4096 bytes" in response.json()["detail"]


def test_streamed_body_is_counted_as_it_arrives(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_body_bytes=4096)

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
        for _ in range(10):
            yield b" " * 1000

    response = client.post(
        "/v1/evaluations", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["status"] == 413


def test_measurement_uploads_get_the_larger_limit(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_body_bytes=4096, max_upload_bytes=65536)
    csv = "model_name,num_gpus\n" + "x,8\n" * 2000  # ~8 KB: over the body limit only
    response = client.post(
        "/v1/clusters/dgx-h100/measurements",
        content=csv.encode(),
        headers={"content-type": "text/csv"},
    )
    assert response.status_code != 413
    too_big = client.post(
        "/v1/clusters/dgx-h100/measurements",
        content=b"a,b\n" * 20000,
        headers={"content-type": "text/csv"},
    )
    assert too_big.status_code == 413


def test_rate_limit_answers_429_with_retry_after(make_client: Callable[..., TestClient]) -> None:
    client = make_client(rate_limit_per_s=0.5, rate_limit_burst=3)
    codes = [client.get("/v1/models").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    limited = client.get("/v1/models")
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) >= 1
    assert limited.headers["content-type"] == "application/problem+json"


def test_rate_limit_spares_probes(make_client: Callable[..., TestClient]) -> None:
    client = make_client(rate_limit_per_s=0.5, rate_limit_burst=2)
    for _ in range(3):
        client.get("/v1/models")
    assert client.get("/v1/models").status_code == 429
    assert client.get("/healthz").status_code == 200
    assert client.get("/metrics").status_code == 200


def test_weighted_bucket_refills_at_its_rate_and_charges_the_cost() -> None:
    buckets = WeightedBuckets(rate_per_s=2.0, burst=12)
    assert buckets.take("a", cost=10, now=0.0) == 0.0
    assert buckets.take("a", cost=1, now=0.0) == 0.0
    assert buckets.take("a", cost=10, now=0.0) == pytest.approx(4.5)  # 1 left, 9 more at 2/s
    assert buckets.take("a", cost=10, now=4.5) == 0.0
    assert buckets.take("b", cost=1, now=0.0) == 0.0  # another identity, another bucket
    assert WeightedBuckets(rate_per_s=1, burst=5).take("c", cost=10, now=0) == 0.0  # full: goes


@pytest.mark.parametrize(
    ("method", "path", "cost"),
    [
        ("GET", "/v1/plan-jobs", 1.0),
        ("POST", "/v1/evaluations", 1.0),
        ("POST", "/v1/plan-jobs", 10.0),
        ("POST", "/v1/batches", 20.0),
        ("POST", "/v1/clusters/dgx/calibrations", 10.0),
        ("DELETE", "/v1/keys/abc", 2.0),
    ],
)
def test_request_cost_weighs_what_the_request_asks(method: str, path: str, cost: float) -> None:
    assert request_cost(method, path) == cost


def test_plan_jobs_cost_more_than_reads(make_client: Callable[..., TestClient]) -> None:
    client = make_client(rate_limit_per_s=0.1, rate_limit_burst=12)
    assert client.post("/v1/plan-jobs", json={**PLAN, "seed": 1}).status_code == 202
    assert client.get("/v1/models").status_code == 200
    assert client.get("/v1/models").status_code == 200
    assert client.post("/v1/plan-jobs", json={**PLAN, "seed": 2}).status_code == 429
    assert client.get("/v1/models").status_code == 429  # 12 spent: 10 + 1 + 1


def test_a_random_key_prefix_does_not_dodge_the_address_limit(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(
        auth="api-key", secret_key=GOOD_SECRET, rate_limit_ip_per_s=0.1, rate_limit_ip_burst=3
    )
    codes = [
        client.get("/v1/models", headers={"X-API-Key": f"pp_{i:012x}_" + "A" * 43}).status_code
        for i in range(5)
    ]
    assert codes == [401, 401, 401, 429, 429]


def test_a_known_key_prefix_cannot_lock_the_key_out(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(
        auth="api-key", secret_key=GOOD_SECRET, rate_limit_per_s=0.1, rate_limit_burst=3
    )
    key = new_key(client, "read")
    forged = key[: len("pp_") + 13] + "B" * 43  # the victim's public prefix, a wrong secret
    for _ in range(6):
        assert client.get("/v1/models", headers={"X-API-Key": forged}).status_code == 401
    good = [client.get("/v1/models", headers={"X-API-Key": key}).status_code for _ in range(4)]
    assert good == [200, 200, 200, 429]  # the key's own bucket: only its own requests


def test_each_verified_key_has_its_own_bucket(make_client: Callable[..., TestClient]) -> None:
    client = make_client(
        auth="api-key", secret_key=GOOD_SECRET, rate_limit_per_s=0.1, rate_limit_burst=2
    )
    first, second = new_key(client, "read"), new_key(client, "read")
    for _ in range(2):
        assert client.get("/v1/models", headers={"X-API-Key": first}).status_code == 200
    assert client.get("/v1/models", headers={"X-API-Key": first}).status_code == 429
    assert client.get("/v1/models", headers={"X-API-Key": second}).status_code == 200


@pytest.mark.parametrize(
    ("path", "override", "field", "limit"),
    [
        ("/v1/evaluations", {"num_gpus": 10**6}, "num_gpus", "65536"),
        ("/v1/evaluations", {"seq_length": 10**8}, "seq_length", "1048576"),
        ("/v1/evaluations", {"global_batch_size": 10**9}, "global_batch_size", "16777216"),
        ("/v1/evaluations", {"tp": 4096}, "tp", "1024"),
        ("/v1/plan-jobs", {"max_trials": 10**7}, "max_trials", "1000000"),
        ("/v1/plan-jobs", {"top_k": 5000}, "top_k", "1000"),
    ],
)
def test_numbers_above_their_bound_are_422_naming_the_limit(
    client: TestClient, path: str, override: dict[str, Any], field: str, limit: str
) -> None:
    response = client.post(path, json={**EVALUATION, **override})
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"] == field
    assert limit in error["message"]


def test_inline_model_sizes_are_bounded(client: TestClient) -> None:
    model = {"name": "huge", "num_layers": 10**7, "hidden_size": 8192}
    response = client.post("/v1/evaluations", json={**EVALUATION, "model": model})
    assert response.status_code == 422
    assert "num_layers" in response.json()["detail"]
    assert "2048" in response.json()["detail"]


def test_catalog_specs_are_bounded(client: TestClient) -> None:
    response = client.post(
        "/v1/models/import-hf",
        json={"slug": "big", "config": {"num_hidden_layers": 10**6, "hidden_size": 4096}},
    )
    assert response.status_code == 422
    assert "config.num_hidden_layers" in response.json()["detail"]


def test_plan_job_past_its_time_budget_fails_saying_so(
    make_client: Callable[..., TestClient], wait_for: Callable[..., dict[str, Any]]
) -> None:
    client = make_client(job_time_budget_s=0.3)
    job = client.post("/v1/plan-jobs", json=PLAN).json()
    done = wait_for(client, job["id"], {"succeeded", "failed", "cancelled"}, 10)
    assert done["status"] == "failed"
    assert "time budget of 0.3 s" in done["error"]
    assert "PLANNER_JOB_TIME_BUDGET_S" in done["error"]
