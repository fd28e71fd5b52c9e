"""``planner batch``: a row's ``cluster`` column and ``--cluster`` resolve user clusters from the
server's database, as ``planner plan --cluster`` does (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.core.settings import Settings
from app.main import create_app

runner = CliRunner()
ROW = "name,model,num_gpus,seq_length,global_batch_size,max_trials\n"


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A service database holding the user cluster ``four-per-node`` (4 H100 per node)."""
    url = f"sqlite:///{tmp_path}/planner.db"
    settings = Settings(data_dir=tmp_path, database_url=url, workers=0)
    with TestClient(create_app(settings)) as client:
        spec = {"gpu": "h100-sxm-80gb", "gpus_per_node": 4}
        r = client.post("/v1/clusters", json={"slug": "four-per-node", "spec": spec})
        assert r.status_code == 201, r.text
    monkeypatch.setenv("PLANNER_DATABASE_URL", url)
    return url


def _batch(tmp_path: Path, csv_text: str, *flags: str) -> tuple[int, list[dict[str, object]]]:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(csv_text, encoding="utf-8")
    out = tmp_path / "plans.json"
    result = runner.invoke(cli, ["batch", str(jobs), "-o", str(out), "--workers", "1", *flags])
    rows = json.loads(out.read_text(encoding="utf-8")) if out.exists() else []
    return result.exit_code, rows


def test_cluster_column_names_a_user_cluster(database: str, tmp_path: Path) -> None:
    text = "name,model,cluster,num_gpus,seq_length,global_batch_size,max_trials\n"
    text += "mine,llama3.1-8b,four-per-node,8,4096,64,50\nbad,llama3.1-8b,no-such,8,4096,64,50\n"
    code, rows = _batch(tmp_path, text)
    assert code == 0, rows
    by_name = {row["name"]: row for row in rows}
    assert not by_name["mine"].get("error"), by_name["mine"]
    assert int(str(by_name["mine"]["tp"])) <= 4  # no TP group spans the 4-GPU nodes
    assert "no-such" in str(by_name["bad"]["error"])


def test_cluster_flag_is_the_cluster_of_rows_without_one(database: str, tmp_path: Path) -> None:
    row = ROW + "a,llama3.1-8b,8,4096,64,50\n"
    code, rows = _batch(tmp_path, row, "--cluster", "four-per-node")
    assert code == 0 and rows and not rows[0].get("error"), rows
    code, rows = _batch(tmp_path, row, "--cluster", "nope")
    assert code == 1 and "nope" in str(rows[0]["error"])
