"""A settings check across variables (production without a long secret) is one line naming the
variable, not "PLANNER_: Value error, PLANNER_SECRET_KEY ..." (QA round 9)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from app.cli import cli


def test_a_cross_setting_error_names_its_variable_once(tmp_path: Path) -> None:
    env = {
        "PLANNER_DATA_DIR": str(tmp_path),
        "PLANNER_ENV": "production",
        "PLANNER_AUTH": "api-key",
        "PLANNER_SECRET_KEY": "too-short-s3cret",
    }
    result = CliRunner().invoke(cli, ["keys", "list"], env=env)
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert "error: bad setting: PLANNER_SECRET_KEY must be at least 32 characters" in err, err
    assert "PLANNER_:" not in err and "Value error" not in err
    assert "s3cret" not in result.output + err


def test_a_single_bad_variable_keeps_its_name(tmp_path: Path) -> None:
    env = {"PLANNER_DATA_DIR": str(tmp_path), "PLANNER_JOB_TIME_BUDGET_S": "soon"}
    result = CliRunner().invoke(cli, ["keys", "list"], env=env)
    assert result.exit_code == 2, result.output
    assert "bad setting: PLANNER_JOB_TIME_BUDGET_S:" in result.stderr
