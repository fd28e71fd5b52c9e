"""A fixed tp that cannot split the model's heads is refused when the request is made, naming
tp and the values that work, in the API, the CLI and batch rows alike (QA leftover 10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cli import cli
from app.planning.axis_rules import tp_conflict
from models_db import load_model
from tests.app.planning.interfaces import batch_rows, flags, runner

REQUEST: dict[str, Any] = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "seq_length": 4096,
    "global_batch_size": 256,
    "tp": 3,
    "max_trials": 20,
}
VALID = "valid tp: 1, 2, 4, 8, 16, 32, 64"


def test_the_rule_names_the_values_that_work() -> None:
    model = load_model("llama3.1-70b")
    conflict = tp_conflict(model, 3)
    assert conflict is not None and conflict.valid == (1, 2, 4, 8, 16, 32, 64)
    assert tp_conflict(model, [3, 8]) is None  # a list with a value that works is searched
    assert tp_conflict(model, None) is None and tp_conflict(model, 8) is None


def test_api_refuses_the_job_with_422_naming_tp(real_client: TestClient) -> None:
    response = real_client.post("/v1/plan-jobs", json=REQUEST)
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["field"] == "tp" and VALID in error["message"]


@pytest.mark.usefixtures("no_server_database")
def test_cli_plan_refuses_it() -> None:
    result = runner.invoke(cli, ["plan", *flags(REQUEST)])
    assert result.exit_code != 0
    assert "--tp" in result.output or "tp=3" in result.output
    assert VALID in result.output.replace("\n", " ")


@pytest.mark.usefixtures("no_server_database")
def test_batch_row_names_it(tmp_path: Path) -> None:
    [row] = batch_rows(REQUEST, tmp_path)
    assert row.get("status") != "ok"
    assert VALID in " ".join(str(v) for v in row.values())
