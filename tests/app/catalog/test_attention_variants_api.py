"""Catalog routes with the attention/activation variants: stored, read back, 422 naming the
field on a bad value."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.app.catalog.test_api import SMALL

GPT_OSS_LIKE = {
    **SMALL,
    "swiglu": False,
    "quick_geglu": True,
    "glu_linear_offset": 1.0,
    "activation_func_clamp_value": 7.0,
    "window_size": [127, 0],
    "window_attn_skip_freq": 2,
    "softmax_type": "learnable",
}


def test_variant_fields_are_stored_and_read_back(client: TestClient) -> None:
    r = client.post("/v1/models", json={"slug": "oss-like", "spec": GPT_OSS_LIKE})
    assert r.status_code == 201, r.text
    spec = client.get("/v1/models/oss-like").json()["spec"]
    assert spec["window_size"] == [127, 0]
    assert (spec["window_attn_skip_freq"], spec["softmax_type"]) == (2, "learnable")
    assert (spec["quick_geglu"], spec["swiglu"], spec["activation_func_clamp_value"]) == (
        True,
        False,
        7.0,
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"window_size": [-1, 0]}, "spec.window_size"),
        ({"window_size": [127]}, "spec.window_size"),
        ({"window_attn_skip_freq": 0}, "spec.window_attn_skip_freq"),
        ({"softmax_type": "sink"}, "spec.softmax_type"),
        ({"swiglu": True}, "spec.quick_geglu"),
        ({"activation_func_clamp_value": -7.0}, "spec.activation_func_clamp_value"),
    ],
)
def test_bad_variant_value_is_422_naming_the_field(
    client: TestClient, change: dict[str, Any], field: str
) -> None:
    r = client.post("/v1/models", json={"slug": "bad", "spec": {**GPT_OSS_LIKE, **change}})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == field
