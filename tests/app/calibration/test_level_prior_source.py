"""One source of truth: the level of ``planner calibrate`` (API, CLI) and ``--suggest`` take the
prior sd of a new cluster's offset from the shipped interval table's transfer spread, the tau its
band uses (models_db.intervals.cluster_level_noise)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import models_db.intervals as intervals_db
from app.cli import cli
from models_db.intervals import cluster_level_noise, load_interval_table
from planner.calibration.intervals import shown_band
from planner.calibration.regularised import NOISE_LOG_SD, NOISE_SHARED_LOG_SD
from tests.app.calibration.test_api import _csv_text, _h100_rows
from tests.app.conftest import LAYOUT_70B


def _tau() -> float:
    table = load_interval_table()
    assert table is not None and table.transfer is not None, "the shipped table has a transfer"
    return table.transfer.log_sd


def test_the_level_noise_is_the_tables_tau() -> None:
    noise = cluster_level_noise()
    assert noise.shared_log_sd == _tau()
    assert noise.within_log_sd == NOISE_LOG_SD


def test_a_table_without_a_transfer_block_falls_back_to_the_reml_sigma_b(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = load_interval_table()
    assert table is not None
    bare = replace(table, transfer=None)
    monkeypatch.setattr(intervals_db, "load_interval_table", lambda: bare)
    assert intervals_db.cluster_level_noise().shared_log_sd == NOISE_SHARED_LOG_SD


def test_the_api_calibration_level_uses_tau_and_the_band_agrees(client: TestClient) -> None:
    rows = _h100_rows()
    client.post("/v1/clusters/dgx-h100/measurements", json=rows)
    r = client.post("/v1/clusters/dgx-h100/calibrations")
    assert r.status_code == 201, r.text
    level = r.json()["report"]["level"]
    tau, n, sw = _tau(), level["n_rows"], level["within_log_sd"]
    assert level["prior_log_sd"] == pytest.approx(tau, abs=1e-5)
    assert level["shrinkage"] == pytest.approx(n * tau**2 / (n * tau**2 + sw**2), abs=1e-4)
    # the band of the calibrated cluster: its offset sd is the level's posterior sd
    table = load_interval_table()
    assert table is not None
    _, _, words, extra = shown_band(table, table.bands["all"], level)
    assert extra["cluster_offset_log_sd"] == pytest.approx(level["log_sd"], abs=2e-4)
    assert "narrowed" in words


def test_the_cli_level_line_says_tau_between_clusters(tmp_path: Path) -> None:
    rows = _h100_rows()
    path = tmp_path / "runs.csv"
    path.write_text(_csv_text(rows))
    out = CliRunner().invoke(cli, ["calibrate", "--measurements", str(path)])
    assert out.exit_code == 0, out.output
    assert f"against {100 * _tau():.1f} % between clusters" in out.stdout


def test_suggest_weighs_its_runs_with_the_levels_prior(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.planning.suggest as service

    seen: list[dict[str, Any]] = []
    real = service.suggest_runs

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(service, "suggest_runs", spy)
    r = client.post("/v1/calibration-suggestions", json={"evaluation": LAYOUT_70B, "k": 2})
    assert r.status_code == 200, r.text
    assert seen and seen[0]["noise"] == cluster_level_noise()
    assert seen[0]["noise"].shared_log_sd == _tau()
