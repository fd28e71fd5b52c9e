"""POST /v1/calibration-suggestions and `planner calibrate --suggest` (issue 12 item 10)."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from tests.app.conftest import LAYOUT_70B

EIGHT_B = {
    "model": "llama3.1-8b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 16,
    "seq_length": 8192,
    "global_batch_size": 128,
    "tp": 2,
}


def test_suggestions_come_with_launch_commands(client: TestClient) -> None:
    r = client.post("/v1/calibration-suggestions", json={"evaluation": LAYOUT_70B, "k": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert 1 <= len(body["runs"]) <= 2
    assert body["plan_uncertainty_pct_after"] < body["plan_uncertainty_pct_before"]
    for run in body["runs"]:
        assert run["num_gpus"] < LAYOUT_70B["num_gpus"]
        assert "--train-iters 50" in run["command"] and run["minutes"] > 0


def test_suggestions_need_exactly_one_plan(client: TestClient) -> None:
    r = client.post("/v1/calibration-suggestions", json={"k": 2})
    assert r.status_code == 422
    assert "exactly one of evaluation" in r.text
    r = client.post("/v1/calibration-suggestions", json={"evaluation": LAYOUT_70B, "k": 0})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "k"


def test_cli_suggest_prints_runs_and_commands(tmp_path: Path) -> None:
    request = tmp_path / "layout.json"
    request.write_text(json.dumps(EIGHT_B))
    result = CliRunner().invoke(
        cli, ["calibrate", "--suggest", "2", "--request", str(request), "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["plan"]["model"] == "llama3.1-8b" and len(out["runs"]) == 2
    assert all("torchrun" in run["command"] for run in out["runs"])


def test_cli_suggest_without_a_request_fails_clearly() -> None:
    result = CliRunner().invoke(cli, ["calibrate", "--suggest", "2"])
    assert result.exit_code == 2 and "--request" in result.stderr
