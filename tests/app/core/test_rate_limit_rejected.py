"""Rate limits and bad input (QA leftover 9): a request answered 422 costs what a read costs,
not what it asked for; every 429 has one problem-JSON body, whichever limit sent it."""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi.testclient import TestClient

from tests.app.conftest import JOB_70B
from tests.app.keys.test_auth import GOOD_SECRET, new_key

BAD_PLAN = {**JOB_70B, "seq_length": -1}


def test_bad_plan_jobs_cost_a_read_each(make_client: Callable[..., TestClient]) -> None:
    # a plan job costs 10: without the refund the 4th bad one would be refused (burst 30)
    client = make_client(rate_limit_per_s=0.01, rate_limit_burst=30)
    codes = [client.post("/v1/plan-jobs", json=BAD_PLAN).status_code for _ in range(20)]
    assert codes == [422] * 20
    assert client.get("/v1/models").status_code == 200  # 20 spent of 30: reads still go


def test_bad_requests_are_still_limited(make_client: Callable[..., TestClient]) -> None:
    client = make_client(rate_limit_per_s=0.01, rate_limit_burst=30)
    codes = {client.post("/v1/plan-jobs", json=BAD_PLAN).status_code for _ in range(40)}
    assert codes == {422, 429}


def test_the_address_limit_refunds_too(make_client: Callable[..., TestClient]) -> None:
    client = make_client(rate_limit_ip_per_s=0.01, rate_limit_ip_burst=30)
    codes = [client.post("/v1/plan-jobs", json=BAD_PLAN).status_code for _ in range(20)]
    assert codes == [422] * 20


def _limited_body(client: TestClient, headers: dict[str, str]) -> bytes:
    for _ in range(10):
        response = client.get("/v1/models", headers=headers)
        if response.status_code == 429:
            return response.content
    raise AssertionError("never limited")


def test_both_limits_send_one_body_shape(make_client: Callable[..., TestClient]) -> None:
    by_address = make_client(rate_limit_ip_per_s=0.01, rate_limit_ip_burst=2)
    by_key = make_client(
        auth="api-key", secret_key=GOOD_SECRET, rate_limit_per_s=0.01, rate_limit_burst=2
    )
    bodies = [
        _limited_body(by_address, {}),
        _limited_body(by_key, {"X-API-Key": new_key(by_key, "read")}),
    ]
    shape = re.compile(
        rb'\{"type":"https://parallel-planner.dev/problems/429","title":"Too many requests",'
        rb'"status":429,"detail":"rate limit of [^"]+ per (client address|API key) exceeded; '
        rb'[^"]+","errors":\[\]\}'
    )
    for body in bodies:  # byte for byte the same layout: compact, ASCII, the same keys in order
        assert shape.fullmatch(body), body
