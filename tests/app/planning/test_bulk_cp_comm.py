"""``--cp-comm-type`` in bulk evaluation (issue 12): taken per layout or from the request, chosen
by the planner when absent (as a single evaluation and the search choose it), priced, checked by
the same rules as a single evaluation, and returned on every line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.planning.compute import evaluate_request

JOB: dict[str, Any] = {
    "model": "llama3.1-8b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 16,
    "gpus_per_node": 8,
    "seq_length": 32768,
    "global_batch_size": 16,
}
LAYOUTS: list[dict[str, Any]] = [
    {"tp": 2, "cp": 4},  # open: the planner's choice
    {"tp": 2, "cp": 4, "cp_comm_type": "p2p"},
    {"tp": 2, "cp": 4, "cp_comm_type": "all_gather"},
    {"tp": 2, "cp": 4, "cp_comm_type": "a2a"},
    {"tp": 4, "cp": 4, "cp_comm_type": "a2a"},  # cp = 4 does not divide 2 KV heads per TP rank
    {"tp": 2, "cp": 8},  # open, across two nodes
    {"tp": 8, "pp": 2},  # cp = 1: nothing to choose
]


def lines(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post("/v1/evaluations/bulk", json=body)
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


@pytest.fixture
def bulk(client: TestClient) -> list[dict[str, Any]]:
    return lines(client, {**JOB, "layouts": LAYOUTS})


@pytest.mark.parametrize("i", range(len(LAYOUTS)))
def test_each_line_carries_the_type_and_the_numbers_of_the_single_evaluation(
    bulk: list[dict[str, Any]], i: int
) -> None:
    single = evaluate_request({**JOB, **LAYOUTS[i]}).model_dump(mode="json")
    line = bulk[i]
    assert line["cp_comm_type"] == single["layout"]["cp_comm_type"]
    assert line["valid"] == single["valid"]
    assert line["memory_bytes"] == pytest.approx(single["memory"]["total_bytes"], rel=1e-9)
    if single["valid"]:
        assert line["step_time_s"] == pytest.approx(single["performance"]["step_time_s"], 1e-9)


def test_given_types_are_kept_and_priced(bulk: list[dict[str, Any]]) -> None:
    assert [line["cp_comm_type"] for line in bulk[1:4]] == ["p2p", "all_gather", "a2a"]
    times = {line["cp_comm_type"]: line["step_time_s"] for line in bulk[1:4]}
    assert len(set(times.values())) == 3  # each type has its own attention time
    memory = {line["cp_comm_type"]: line["memory_bytes"] for line in bulk[1:4]}
    assert memory["all_gather"] > memory["p2p"] == memory["a2a"]  # the gathered K/V


def test_an_open_type_is_the_fastest_valid_one(bulk: list[dict[str, Any]]) -> None:
    fastest = min(bulk[1:4], key=lambda line: line["step_time_s"])
    assert bulk[0]["cp_comm_type"] == fastest["cp_comm_type"]
    assert bulk[0]["step_time_s"] == fastest["step_time_s"]
    assert bulk[5]["cp_comm_type"] in ("p2p", "all_gather", "a2a", "a2a+p2p")
    assert bulk[6]["cp_comm_type"] is None  # cp = 1


def test_a_type_the_heads_cannot_take_is_invalid_with_the_rule(
    bulk: list[dict[str, Any]],
) -> None:
    line = bulk[4]
    assert not line["valid"] and line["step_time_s"] is None
    assert any("cp_comm_type='a2a'" in v for v in line["violations"])


def test_the_request_type_applies_to_layouts_without_one(client: TestClient) -> None:
    body = {**JOB, "cp_comm_type": "all_gather", "layouts": [LAYOUTS[0], LAYOUTS[1]]}
    got = lines(client, body)
    assert [line["cp_comm_type"] for line in got] == ["all_gather", "p2p"]


def test_an_unknown_type_is_422_naming_the_row_and_field(client: TestClient) -> None:
    bad = [LAYOUTS[0], {"tp": 2, "cp": 4, "cp_comm_type": "ring"}]
    response = client.post("/v1/evaluations/bulk", json={**JOB, "layouts": bad})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "layouts.1.cp_comm_type"


def test_the_cli_input_lines_take_and_choose_it(tmp_path: Path) -> None:
    """``planner evaluate --input``: the CLI's many-layouts evaluation, same choice and rule."""
    path = tmp_path / "layouts.jsonl"
    path.write_text("".join(json.dumps({**JOB, **x}) + "\n" for x in LAYOUTS[:5]), "utf-8")
    result = CliRunner().invoke(cli, ["evaluate", "--input", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = [json.loads(x) for x in result.stdout.splitlines() if x.strip()]
    types = [x["layout"]["cp_comm_type"] for x in out]
    assert types[1:] == ["p2p", "all_gather", "a2a", "a2a"] and types[0] is not None
    assert not out[4]["valid"]
    flag = out[2]["megatron"]["command"]
    assert "--cp-comm-type all_gather" in flag


def test_a_null_type_on_a_layout_takes_the_requests(client: TestClient) -> None:
    """null means "not set on this layout", as a missing key does: the request's type."""
    layouts = [
        {"tp": 2, "cp": 4, "cp_comm_type": None},
        {"tp": 2, "cp": 4},
        {"tp": 2, "cp": 4, "cp_comm_type": "p2p"},
    ]
    got = lines(client, {**JOB, "cp_comm_type": "all_gather", "layouts": layouts})
    assert [line["cp_comm_type"] for line in got] == ["all_gather", "all_gather", "p2p"]
    assert got[0]["step_time_s"] == got[1]["step_time_s"]
    # without a request type, null leaves the choice to the planner, as a missing key does
    open_ = lines(client, {**JOB, "layouts": layouts[:2]})
    assert open_[0]["cp_comm_type"] == open_[1]["cp_comm_type"] is not None


def test_a_cp_1_layout_reports_no_type_whatever_was_asked(client: TestClient) -> None:
    layouts = [{"tp": 8, "pp": 2}, {"tp": 8, "pp": 2, "cp_comm_type": "a2a+p2p"}]
    got = lines(client, {**JOB, "cp_comm_type": "all_gather", "layouts": layouts})
    assert [line["cp_comm_type"] for line in got] == [None, None]
    assert all(line["valid"] for line in got)
    assert got[0]["step_time_s"] == got[1]["step_time_s"]


def test_the_schema_says_what_null_means(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    text = json.dumps(schema["BulkLayout"]["properties"]["cp_comm_type"])
    assert "the request's cp_comm_type" in text and "cp = 1" in text
