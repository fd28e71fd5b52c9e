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


def test_a_calibration_reports_what_moved_and_its_cv_spread(client: TestClient) -> None:
    from tests.app.calibration.test_api import _h100_rows

    rows = [r for r in _h100_rows(limit_sweeps=20) if r["precision"] == "bf16"]
    rows = [r for r in rows if r["sweep_id"] in sorted({r["sweep_id"] for r in rows})[:2]]
    client.post("/v1/clusters/dgx-h100/measurements", json=rows)
    report = client.post("/v1/clusters/dgx-h100/calibrations").json()["report"]
    by_name = {c["name"]: c for c in report["coefficients"]}
    assert set(report["moved"]) <= {n for n, c in by_name.items() if c["identified"]}
    # the rows are bf16 only: the fp8 plateau is not identified and keeps its prior
    assert not by_name["fp8_gemm_efficiency"]["identified"]
    assert by_name["fp8_gemm_efficiency"]["fitted"] == by_name["fp8_gemm_efficiency"]["prior"]
    cv = report["cross_validation"]
    assert cv["method"] and cv["folds"] >= 2
    assert cv["after"]["p90_ape"] >= cv["after"]["median_ape"]


def test_cli_calibrate_lists_skipped_rows_only_on_request(tmp_path: Path) -> None:
    from tests.app.calibration.test_api import _csv_text, _h100_rows

    rows = _h100_rows()
    broken = {**rows[0], "row_id": "BROKEN", "seq_length": "", "num_gpus": ""}
    path = tmp_path / "runs.csv"
    path.write_text(_csv_text([*rows, broken]))
    plain = CliRunner().invoke(cli, ["calibrate", "--measurements", str(path)])
    assert plain.exit_code == 0, plain.output
    assert "1 rows skipped" in plain.stdout and "BROKEN" not in plain.stdout
    assert "moved" in plain.stdout
    listed = CliRunner().invoke(cli, ["calibrate", "--measurements", str(path), "--show-skipped"])
    assert "BROKEN" in listed.stdout


WIDE_70B = {
    **LAYOUT_70B,
    "num_gpus": 640,
    "seq_length": 16384,
    "global_batch_size": 64,
    "tp": 8,
    "cp": 4,
    "pp": 10,
}
"""One replica is tp 8 x cp 4 x pp 10 = 320 GPUs (40 nodes); its smallest proxy 2 stages, 8."""


def test_a_replica_larger_than_four_nodes_is_measured_on_a_proxy(client: TestClient) -> None:
    # k=5: with the REML row noise (bench/results/noise.md) the third run is a tp4 cp4 proxy on
    # 4 nodes and the plan's own tp8 cp4 comes third of five (it was third of three before)
    r = client.post("/v1/calibration-suggestions", json={"evaluation": WIDE_70B, "k": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["runs"] and "320 GPUs" in body["note"]
    kept = [run for run in body["runs"] if run["layout"]["cp"] == 4 and run["layout"]["tp"] == 8]
    assert kept and all(run["nodes"] >= 8 for run in kept)
    for run in kept:
        assert run["num_layers"] == 8 * run["layout"]["pp"] < 80


def test_a_budget_below_the_proxy_is_said_in_the_answer(client: TestClient) -> None:
    r = client.post(
        "/v1/calibration-suggestions", json={"evaluation": WIDE_70B, "k": 3, "max_nodes": 4}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert all(run["nodes"] <= 4 for run in body["runs"])
    assert "allow at least 8" in body["note"]
    bad = client.post(
        "/v1/calibration-suggestions", json={"evaluation": WIDE_70B, "k": 3, "max_nodes": 0}
    )
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "max_nodes"
    huge = client.post(  # bounded like every number: a node has at least one GPU
        "/v1/calibration-suggestions", json={"evaluation": WIDE_70B, "max_nodes": 10**23}
    )
    assert huge.status_code == 422 and huge.json()["errors"][0]["field"] == "max_nodes"


def test_cli_suggest_prints_the_note_and_takes_a_budget(tmp_path: Path) -> None:
    request = tmp_path / "layout.json"
    request.write_text(json.dumps({**WIDE_70B, "model": "llama3.1-405b", "pp": 9}))
    result = CliRunner().invoke(
        cli,
        ["calibrate", "--suggest", "2", "--request", str(request), "--max-nodes", "4"],
    )
    assert result.exit_code == 0, result.output
    assert "Note:" in result.stdout and "allow at least 8" in result.stdout


def test_cli_suggest_keeps_the_request_files_budget(tmp_path: Path) -> None:
    # a request file in the API's shape may carry max_nodes; without --max-nodes it applies
    request = tmp_path / "suggest.json"
    layout = {**WIDE_70B, "model": "llama3.1-405b", "pp": 9}
    request.write_text(json.dumps({"evaluation": layout, "max_nodes": 4}))
    result = CliRunner().invoke(cli, ["calibrate", "--suggest", "2", "--request", str(request)])
    assert result.exit_code == 0, result.output
    assert "allow at least 8" in result.stdout


def test_cli_max_nodes_without_suggest_fails_clearly() -> None:
    result = CliRunner().invoke(
        cli, ["calibrate", "--measurements", "examples/measurements.csv", "--max-nodes", "4"]
    )
    assert result.exit_code != 0
    assert "--max-nodes" in result.output and "--suggest" in result.output


def test_the_sdk_asks_the_same_question(client: TestClient) -> None:
    """PlannerClient.suggest_runs is the API's answer, budget and field errors included."""
    from app.sdk import PlannerAPIError, PlannerClient

    api = client.post(
        "/v1/calibration-suggestions", json={"evaluation": LAYOUT_70B, "k": 2, "max_nodes": 2}
    ).json()
    with PlannerClient("http://testserver", transport=client._transport) as sdk:
        got = sdk.suggest_runs(evaluation=LAYOUT_70B, k=2, max_nodes=2)
        assert [r["command"] for r in got["runs"]] == [r["command"] for r in api["runs"]]
        try:
            sdk.suggest_runs(evaluation=LAYOUT_70B, max_nodes=0)
        except PlannerAPIError as exc:
            assert exc.status == 422 and any(e["field"] == "max_nodes" for e in exc.errors)
        else:
            raise AssertionError("max_nodes 0 was accepted")


def test_cli_names_a_bad_field_of_the_request_file_inside_it(tmp_path: Path) -> None:
    """It read "(field: --evaluation (num_gpus))" before: a flag that does not exist."""
    request = tmp_path / "layout.json"
    request.write_text(json.dumps({**WIDE_70B, "num_gpus": True}))
    result = CliRunner().invoke(cli, ["calibrate", "--suggest", "2", "--request", str(request)])
    assert result.exit_code == 2
    assert "(field: --request (evaluation.num_gpus))" in result.stderr
    flag = ["calibrate", "--suggest", "2", "--request", str(request), "--max-nodes", "99999999"]
    request.write_text(json.dumps(WIDE_70B))
    result = CliRunner().invoke(cli, flag)
    assert result.exit_code == 2 and "(field: --max-nodes)" in result.stderr
