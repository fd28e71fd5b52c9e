"""The cluster's level in what a calibration returns and stores: the API's JSON and its stored
profile, the CLI summary and the web page."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from planner.performance.profile import PerformanceProfile
from tests.app.calibration.test_api import _csv_text, _h100_rows


def test_the_level_round_trips_through_the_api(client: TestClient) -> None:
    rows = _h100_rows()
    slower = [{**r, "tokens_per_sec_per_gpu": "", "step_time_s": ""} for r in rows]
    for r, s in zip(rows, slower, strict=True):  # every run 10 % slower than measured
        if r["tokens_per_sec_per_gpu"]:
            s["tokens_per_sec_per_gpu"] = str(0.9 * float(r["tokens_per_sec_per_gpu"]))
        else:
            s["step_time_s"] = str(float(r["step_time_s"]) / 0.9)
    client.post("/v1/clusters/dgx-h100/measurements", json=slower)
    r = client.post("/v1/clusters/dgx-h100/calibrations")
    assert r.status_code == 201, r.text
    body = r.json()
    level = body["report"]["level"]
    assert level["n_rows"] == len(rows) and level["applied"] is True
    assert 0 < level["log_sd"] < level["prior_log_sd"]
    stored = client.get("/v1/clusters/dgx-h100/calibrations").json()["items"][0]["profile"]
    assert stored == body["profile"]
    profile = PerformanceProfile.from_dict(stored)
    assert profile.cluster_step_scale == pytest.approx(level["cluster_step_scale"], abs=1e-5)
    assert profile.cluster_step_scale > 1.0  # the uploaded runs are slower than the shared ones
    assert profile.provenance["cluster_level"]["n_rows"] == len(rows)


def test_the_cli_summary_and_the_web_page_show_the_level(
    tmp_path: Path, client: TestClient
) -> None:
    rows = _h100_rows()
    path = tmp_path / "runs.csv"
    path.write_text(_csv_text(rows))
    out = CliRunner().invoke(cli, ["calibrate", "--measurements", str(path)])
    assert out.exit_code == 0, out.output
    assert "cluster level: step time x" in out.stdout
    assert f"{len(rows)} rows" in out.stdout
    page = client.post(
        "/calibration",
        data={"cluster": "dgx-h100"},
        files={"file": ("runs.csv", _csv_text(rows).encode(), "text/csv")},
    )
    assert page.status_code == 200
    assert 'id="cluster-level"' in page.text and "posterior sd" in page.text
