"""``planner batch`` refuses what it cannot read or write before any job runs, in one line
naming the file (QA round 9: a bad output folder was found only after every job was planned,
and a binary jobs file was "a file is not UTF-8 text" without saying which)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import app.cli.batch as batch_cli
from app.cli import cli

ROOT = Path(__file__).resolve().parents[3]
JOBS = ROOT / "examples" / "jobs.csv"


@pytest.fixture
def no_planning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning a job fails the test: each case must stop before it."""

    def ran(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the batch was planned before its output was checked")

    monkeypatch.setattr(batch_cli, "_local", ran)
    monkeypatch.setattr(batch_cli, "_remote", ran)


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stderr


@pytest.mark.usefixtures("no_planning")
def test_an_output_in_a_missing_folder_is_refused_before_planning(tmp_path: Path) -> None:
    out = tmp_path / "no-such-folder" / "plans.csv"
    code, err = run("batch", str(JOBS), "-o", str(out))
    assert code == 2, err
    assert f"cannot write {out}: its folder does not exist" in err and "--output" in err


@pytest.mark.usefixtures("no_planning")
def test_an_output_that_is_a_folder_is_refused_before_planning(tmp_path: Path) -> None:
    out = tmp_path / "plans.csv"
    out.mkdir()
    code, err = run("batch", str(JOBS), "-o", str(out), "--server", "http://127.0.0.1:9")
    assert code == 2, err
    assert f"cannot write {out}: it is a folder" in err and "--output" in err


@pytest.mark.usefixtures("no_planning")
def test_a_binary_jobs_file_is_named(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_bytes(b"\xff\xfe\x00binary")
    code, err = run("batch", str(jobs), "-o", str(tmp_path / "out.csv"))
    assert code == 2, err
    assert f"{jobs} is not UTF-8 text (byte 0)" in err and "JOBS" in err
    assert "Traceback" not in err


def test_a_model_file_that_is_not_json_names_the_file_once(tmp_path: Path) -> None:
    model = tmp_path / "bad.json"
    model.write_text('{"num_layers":', encoding="utf-8")
    code, err = run(
        "plan", "--model", str(model), "--gpu", "h100-sxm-80gb", "--num-gpus", "16",
        "--seq-length", "4096", "--global-batch-size", "64",
    )  # fmt: skip
    assert code == 2, err
    assert f"{model} is not valid JSON" in err and err.count(str(model)) == 1, err
