"""``POST /v1/evaluations/bulk``: one vectorised batch, JSON lines back, the same numbers as
evaluating each layout on its own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.planning.compute import evaluate_request
from tests.app.conftest import JOB_70B

JOB: dict[str, Any] = {**JOB_70B, "gpus_per_node": 8}
LAYOUTS: list[dict[str, Any]] = [
    {"tp": 8, "pp": 4},
    {"tp": 4, "pp": 8, "vpp": 2, "recompute": "selective"},
    {"tp": 2, "pp": 4, "cp": 2, "micro_batch_size": 2, "recompute": "full"},
    {"tp": 8, "pp": 2, "sequence_parallel": False, "optimizer_sharding": "none"},
    {"tp": 3, "pp": 4},  # 3 does not divide 64 heads: invalid
    {"tp": 1, "pp": 1},  # 70B on one GPU's share: does not fit
    {"tp": 8, "pp": 8, "vpp": 3},  # 80 layers are not 8 x 3 chunks: invalid
]


def lines_of(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


@pytest.fixture
def bulk(client: TestClient) -> list[dict[str, Any]]:
    return lines_of(client.post("/v1/evaluations/bulk", json={**JOB, "layouts": LAYOUTS}))


def test_one_line_per_layout_in_request_order(bulk: list[dict[str, Any]]) -> None:
    assert [line["index"] for line in bulk] == list(range(len(LAYOUTS)))


@pytest.mark.parametrize("i", range(len(LAYOUTS)))
def test_each_line_matches_the_single_evaluation(bulk: list[dict[str, Any]], i: int) -> None:
    single = evaluate_request({**JOB, **LAYOUTS[i]}).model_dump(mode="json")
    line = bulk[i]
    assert line["valid"] == single["valid"]
    assert line["fits"] == single["memory"]["fits"]
    assert line["memory_bytes"] == pytest.approx(single["memory"]["total_bytes"], rel=1e-9)
    if single["valid"]:
        perf = single["performance"]
        assert line["step_time_s"] == pytest.approx(perf["step_time_s"], rel=1e-9)
        assert line["tokens_per_s_per_gpu"] == pytest.approx(perf["tokens_per_s_per_gpu"], rel=1e-6)
        assert line["mfu"] == pytest.approx(perf["mfu"], abs=1e-6)
        assert line["violations"] == []
    else:
        assert line["step_time_s"] is None and line["violations"]


def test_a_bad_layout_is_422_naming_it(client: TestClient) -> None:
    bad = [*LAYOUTS[:2], {"tp": 0}]
    response = client.post("/v1/evaluations/bulk", json={**JOB, "layouts": bad})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "layouts.2.tp"


def test_an_unknown_layout_field_is_422(client: TestClient) -> None:
    response = client.post("/v1/evaluations/bulk", json={**JOB, "layouts": [{"tq": 2}]})
    assert response.status_code == 422
    assert "layouts.0" in response.json()["errors"][0]["field"]


def test_an_unknown_model_is_422(client: TestClient) -> None:
    body = {**JOB, "model": "no-such-model", "layouts": LAYOUTS[:1]}
    assert client.post("/v1/evaluations/bulk", json=body).status_code == 422


def test_many_layouts_in_one_request(client: TestClient) -> None:
    many = [LAYOUTS[i % len(LAYOUTS)] for i in range(5000)]
    lines = lines_of(client.post("/v1/evaluations/bulk", json={**JOB, "layouts": many}))
    assert len(lines) == 5000
    assert lines[4999]["valid"] == lines[4999 % len(LAYOUTS)]["valid"]


def test_an_older_stack_prices_bulk_layouts_as_one_evaluation_does() -> None:
    """Megatron-Core 0.8 lacks the MoE all-to-all overlap: a layout that leaves it to the
    planner runs without it, in bulk as alone (bulk called it invalid before: 'a setting of the
    layout needs a newer Megatron-Core')."""
    from app.planning.bulk import evaluate_bulk, layout_columns

    job = {"model": "mixtral-8x7b", "gpu": "h100-sxm-80gb", "num_gpus": 64, "seq_length": 4096,
           "global_batch_size": 256, "megatron_core_version": "0.8"}  # fmt: skip
    single = evaluate_request({**job, "ep": 8}).model_dump(mode="json")
    assert single["valid"] and single["layout"]["moe_a2a_overlap"] is False
    result = evaluate_bulk(job, layout_columns([{"ep": 8}], 64))
    assert not result.violated.any()
    assert result.memory_bytes[0] == pytest.approx(single["memory"]["total_bytes"], rel=1e-9)
    assert result.tokens_per_s_per_gpu is not None
    speed = single["performance"]["tokens_per_s_per_gpu"]
    assert result.tokens_per_s_per_gpu[0] == pytest.approx(speed, rel=1e-6)
