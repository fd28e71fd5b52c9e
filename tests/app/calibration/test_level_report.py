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


def test_recalibrating_a_calibrated_profile_re_estimates_the_level() -> None:
    # the level's prior is the spread between clusters around a profile with no level: a
    # calibrated profile calibrated again on the same rows gets the same level, not the level
    # shrunk again on top of itself (1.079 -> 1.098 -> 1.102 before), and its provenance says
    # the profile's own scale
    from app.calibration.fit import parse_measurement_rows
    from app.calibration.honest import calibrate_gpu_rows
    from models_db.profiles import load_profile

    rows = [
        {**r, "tokens_per_sec_per_gpu": str(0.9 * float(r["tokens_per_sec_per_gpu"]))}
        for r in _example_rows()
    ]
    parsed, _ = parse_measurement_rows(rows)
    once, _ = calibrate_gpu_rows(parsed, load_profile(parsed[0].cluster.gpu))
    twice, report = calibrate_gpu_rows(parsed, once)
    assert once.cluster_step_scale > 1.05
    assert twice.cluster_step_scale == pytest.approx(once.cluster_step_scale, rel=1e-6)
    stored = twice.provenance["cluster_level"]["cluster_step_scale"]
    assert stored == pytest.approx(twice.cluster_step_scale, abs=1e-5)
    assert report["level"]["cluster_step_scale"] == pytest.approx(stored)


def _example_rows() -> list[dict[str, str]]:
    import csv

    path = Path(__file__).parents[3] / "examples" / "measurements.csv"
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_an_upload_with_a_zero_speed_is_refused_and_stores_nothing(client: TestClient) -> None:
    row = {**_example_rows()[0], "tokens_per_sec_per_gpu": "0"}
    r = client.post("/v1/clusters/dgx-h100/measurements", json=[row])
    assert r.status_code == 422, r.text
    assert "tokens_per_sec_per_gpu" in r.json()["detail"] and "positive" in r.json()["detail"]
    assert client.get("/v1/clusters/dgx-h100/measurements").json()["items"] == []


def test_the_cli_says_one_row_in_the_singular(tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text(_csv_text(_example_rows()[:1]))
    out = CliRunner().invoke(cli, ["calibrate", "--measurements", str(path)])
    assert out.exit_code == 0, out.output
    assert "; 1 row," in out.stdout and "1 rows" not in out.stdout
