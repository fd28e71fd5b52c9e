"""Every route of ``/openapi.json`` under hostile input (what a scheduler or a fuzzer sends):
NaN/Infinity literals, integers past 2**63 and past Python's 4 300-digit limit, deep nesting,
duplicate keys, the wrong content type, RTL/zero-width/300-character path segments, page sizes
of 0, -1 and 10**9, repeated query parameters, HEAD, OPTIONS and trailing slashes. No answer
may be a 5xx or a bare 400, and every 422 must name a field (the problem's ``errors``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

BODIES: dict[str, bytes] = {
    "nan": b'{"model": NaN, "slug": "a", "spec": {"num_layers": NaN}, "jobs": [{"model": NaN}]}',
    "infinity": b'{"model": "llama3.1-70b", "num_gpus": Infinity, "seq_length": -Infinity}',
    "past 2**63": b'{"model": "llama3.1-70b", "num_gpus": 9223372036854775808}',
    "5001 digits": b'{"model": "llama3.1-70b", "num_gpus": 1' + b"0" * 5000 + b"}",
    "deep": b"[" * 5000 + b"]" * 5000,
    "duplicate keys": b'{"model": "llama3.1-70b", "model": 1, "slug": "a", "slug": "b"}',
    "zero and negative": b'{"num_gpus": 0, "seq_length": -1, "global_batch_size": -0}',
    "not an object": b'["model"]',
    "unicode": json.dumps({"slug": "\u202e\u200b" + "a" * 300, "model": "\u200b" * 300}).encode(),
}
SEGMENTS = ("\u202eevil\u200b", "x" * 300, "..", "%2e%2e%2fkeys")
QUERIES = ("limit=0", "limit=-1", "limit=1000000000", "limit=1&limit=2", "offset=-1",
           "status=queued&status=running", "format=xml", "partial=maybe", "wait=inf")  # fmt: skip


@pytest.fixture
def hostile(make_client: Callable[..., TestClient]) -> Iterator[TestClient]:
    yield make_client(rate_limit_per_s=0, rate_limit_ip_per_s=0)


def _calls(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, operations in spec["paths"].items():
        for method in operations:
            urls = [path.replace("{", "").replace("}", "")]
            if "{" in path:
                urls = [path.split("{")[0] + s + path.split("}", 1)[1] for s in SEGMENTS]
            for url in urls:
                yield "HEAD", url, {}
                yield "OPTIONS", url, {}
                yield method.upper(), url + "/", {}
                if method in ("post", "put", "patch"):
                    for body in BODIES.values():
                        yield method.upper(), url, {"content": body, "headers": JSON}
                    yield method.upper(), url, {"content": b"a,b", "headers": TEXT}
                else:
                    for query in QUERIES:
                        yield method.upper(), f"{url}?{query}", {}


JSON = {"content-type": "application/json"}
TEXT = {"content-type": "text/plain"}


def test_no_route_answers_hostile_input_with_a_5xx_or_a_422_naming_nothing(
    hostile: TestClient,
) -> None:
    spec = hostile.get("/openapi.json").json()
    bad = []
    for method, url, kwargs in _calls(spec):
        response = hostile.request(method, url, **kwargs)
        if response.status_code >= 500 or response.status_code == 400:  # 400: names nothing
            bad.append((method, url[:60], kwargs.get("content", b"")[:40], response.text[:120]))
        elif response.status_code == 422 and method != "HEAD":  # HEAD has no body to name it
            errors = response.json().get("errors") or []
            if not errors or not all(e.get("field") and e.get("message") for e in errors):
                bad.append((method, url[:60], kwargs.get("content", b"")[:40], response.text[:120]))
    assert not bad, bad


def test_an_integer_past_the_digit_limit_is_a_422_naming_its_field(client: TestClient) -> None:
    """Python refuses to read an integer of more than 4 300 digits; FastAPI answered 400 "There
    was an error parsing the body" naming nothing. Now the input policy names the field."""
    response = client.post("/v1/plan-jobs", content=BODIES["5001 digits"], headers=JSON)
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["field"] == "num_gpus"
    assert error["message"] == (
        "num_gpus is a whole number of 5001 digits: far above any limit; send a smaller number"
    )
    nested = b'{"jobs": [{"model": "m", "seq_length": -' + b"9" * 4400 + b"}]}"
    response = client.post("/v1/batches", content=nested, headers=JSON)
    assert response.json()["errors"][0]["field"] == "jobs.0.seq_length"
