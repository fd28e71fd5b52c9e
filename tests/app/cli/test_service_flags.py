"""``planner serve`` and ``planner worker`` refuse bad flags with a usage error before they start
anything (QA round 9: ``--log-level nope`` was a traceback from uvicorn or ``logging``, and
``serve --port 99999`` announced a server "on http://127.0.0.1:99999")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli import cli


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    import app.cli.worker as worker_cli

    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("started despite a bad flag")

    monkeypatch.setattr(uvicorn, "run", started)
    monkeypatch.setattr(worker_cli, "run_worker", started)


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["serve", "--log-level", "nope"], "--log-level"),
        (["worker", "--log-level", "nope"], "--log-level"),
        (["worker", "--log-level", "trace"], "--log-level"),  # uvicorn's level, not logging's
        (["serve", "--port", "99999"], "--port"),
        (["serve", "--port", "0"], "--port"),
        (["serve", "--workers", "0"], "--workers"),
    ],
)
def test_a_bad_flag_is_a_usage_error(args: list[str], flag: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, args, env={"PLANNER_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{flag}'" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_level_is_read_in_any_case(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import uvicorn

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: seen.update(kw))
    result = CliRunner().invoke(
        cli, ["serve", "--log-level", "WARNING"], env={"PLANNER_DATA_DIR": str(tmp_path)}
    )
    assert result.exit_code == 0, result.output
    assert seen["log_level"] == "warning"
