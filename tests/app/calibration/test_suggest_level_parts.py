"""`--suggest`'s answer counts the cluster's level beside the coefficients (issue 12 items 9-10):
the API's figures and the CLI's sentence."""

from __future__ import annotations

import json
import math
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from models_db.intervals import cluster_level_noise
from tests.app.conftest import LAYOUT_70B

TAU = cluster_level_noise().shared_log_sd


def test_an_uncalibrated_clusters_level_is_in_the_plans_uncertainty(client: TestClient) -> None:
    r = client.post("/v1/calibration-suggestions", json={"evaluation": LAYOUT_70B, "k": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    before, after = body["uncertainty_before"], body["uncertainty_after"]
    assert before["cluster_level_rows"] == 0
    assert abs(before["cluster_level_pct"] - 100 * math.expm1(TAU)) < 0.01
    assert after["cluster_level_rows"] == len(body["runs"]) == 2
    assert after["cluster_level_pct"] < before["cluster_level_pct"]
    assert body["plan_uncertainty_pct_before"] == before["total_pct"]
    assert before["total_pct"] > max(before["coefficients_pct"], before["cluster_level_pct"])


def test_cli_says_both_parts(tmp_path: Path) -> None:
    request = tmp_path / "layout.json"
    request.write_text(json.dumps(LAYOUT_70B))
    result = CliRunner().invoke(cli, ["calibrate", "--suggest", "2", "--request", str(request)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert f"the cluster's level ±{100 * math.expm1(TAU):.1f}% from 0 of its runs) now" in text
    assert "from 2 of its runs) once these runs are measured" in text


def test_the_api_documents_what_the_uncertainty_counts(client: TestClient) -> None:
    """plan_uncertainty_pct_* changed meaning (the level is counted now): the OpenAPI document
    says so, and describes every field of a real answer."""
    doc = client.get("/openapi.json").json()
    ok = doc["paths"]["/v1/calibration-suggestions"]["post"]["responses"]["200"]
    ref = ok["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    props = doc["components"]["schemas"][ref]["properties"]
    assert "cluster level" in props["plan_uncertainty_pct_before"]["description"]
    r = client.post("/v1/calibration-suggestions", json={"evaluation": LAYOUT_70B, "k": 2})
    assert r.status_code == 200, r.text
    assert set(r.json()) <= set(props)
    from app.planning.suggestion_schemas import SuggestionAnswer

    SuggestionAnswer.model_validate(r.json())
