"""docs/file-formats.md: a suggestion request file is a bare layout object (or ``{"evaluation":
...}`` / ``{"plan": ...}``), "it may add max_nodes", and "this object with k added is the body of
POST /v1/calibration-suggestions". QA round 9: the API refused the bare object (``unknown field
'model'`` for every field) and the CLI refused a bare object with ``max_nodes``."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.planning.suggest import wrap_bare_layout

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = json.loads((ROOT / "examples" / "suggest-large-plan.json").read_text(encoding="utf-8"))


def test_the_api_takes_the_example_file_with_k_added(client: TestClient) -> None:
    bare = client.post("/v1/calibration-suggestions", json={**EXAMPLE, "k": 2, "max_nodes": 4})
    wrapped = client.post(
        "/v1/calibration-suggestions", json={"evaluation": EXAMPLE, "k": 2, "max_nodes": 4}
    )
    assert bare.status_code == 200, bare.text
    assert bare.json() == wrapped.json()
    assert all(run["nodes"] <= 4 for run in bare.json()["runs"])


def test_a_bad_field_of_a_bare_layout_is_still_named(client: TestClient) -> None:
    r = client.post("/v1/calibration-suggestions", json={**EXAMPLE, "tp": "eight", "k": 2})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "evaluation.tp"
    r = client.post("/v1/calibration-suggestions", json={"k": 2, "max_nodes": 4})
    assert r.status_code == 422 and "exactly one of evaluation" in r.text


def test_the_cli_takes_a_bare_layout_with_its_budget(tmp_path: Path) -> None:
    request = tmp_path / "suggest.json"
    request.write_text(json.dumps({**EXAMPLE, "max_nodes": 4}), encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["calibrate", "--suggest", "2", "--request", str(request), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert all(run["nodes"] <= 4 for run in json.loads(result.stdout)["runs"])


def test_only_bare_layouts_are_wrapped() -> None:
    plan = {"plan": {"model": "llama3.1-8b"}, "k": 2}
    assert wrap_bare_layout(plan) == plan
    assert wrap_bare_layout({"k": 2}) == {"k": 2}
    assert wrap_bare_layout({"model": "m", "k": 2, "max_nodes": 1}) == {
        "k": 2,
        "max_nodes": 1,
        "evaluation": {"model": "m"},
    }
