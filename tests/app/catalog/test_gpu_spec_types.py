"""A user GPU spec with a value of the wrong JSON type (QA round 8): a 422 naming the field,
never a bare TypeError, and never a boolean taken as a number (``true`` was 1 byte of HBM)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient


def _h100(client: TestClient) -> dict[str, Any]:
    spec = dict(client.get("/v1/gpus/h100-sxm-80gb").json()["spec"])
    spec.pop("name", None)
    return spec


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [  # number fields: the plan request's rule and wording (app/catalog/spec_numbers.py)
        ("hbm_bytes", True, ": got true: true/false is not a number; send a whole number"),
        ("hbm_bytes", "80e9", ": Input should be a valid integer, unable to parse string"),
        ("hbm_bytes", 1.5, ": Input should be a valid integer, got a number with a fraction"),
        ("peak_bf16_flop_per_s", [1], ": Input should be a valid number"),
        ("peak_fp8_flop_per_s", "x", ": got the text 'x': a number is expected (a number such"),
        ("bf16_supported", 1, " must be true or false (got 1)"),
    ],
)
def test_a_wrong_type_is_a_422_naming_the_field(
    client: TestClient, field: str, value: Any, says: str
) -> None:
    r = client.post("/v1/gpus", json={"slug": "my-gpu", "spec": _h100(client) | {field: value}})
    assert r.status_code == 422, r.text
    [error] = r.json()["errors"]
    assert error["field"] == f"spec.{field}"
    assert error["message"].startswith(f"spec.{field}{says}")
    assert client.get("/v1/gpus/my-gpu").status_code == 404


def test_right_types_still_store_and_a_whole_float_is_a_whole_number(client: TestClient) -> None:
    spec = _h100(client) | {"hbm_bytes": 80e9, "peak_fp8_flop_per_s": None}
    r = client.post("/v1/gpus", json={"slug": "my-gpu", "spec": spec})
    assert r.status_code == 201, r.text
