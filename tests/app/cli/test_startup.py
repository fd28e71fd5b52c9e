"""``planner --help`` starts fast: no command, numpy or Typer's help module loads for it, the
command list it shows is each command's own first line, and it looks as Typer draws it."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from app.cli import cli, lazy

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("numpy", "scipy", "optuna", "pydantic", "sqlalchemy", "fastapi", "httpx", "yaml",
         "models_db", "app.planning", "app.catalog", "app.batches", "typer.rich_utils",
         "rich.markdown", "planner.search", "planner.performance", "planner.memory")  # fmt: skip
RUN_AND_LIST = """
import sys
from app.cli import main
sys.argv = ["planner", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("LOADED", " ".join(m for m in HEAVY if m in sys.modules), file=sys.stderr)
"""


def loaded(*args: str) -> list[str]:
    """The heavy modules a fresh ``planner ARGS`` process imported."""
    code = f"HEAVY = {HEAVY!r}\n{RUN_AND_LIST}"
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED"))
    return line.split()[1:]


def test_help_loads_no_command_and_no_heavy_module() -> None:
    assert loaded("--help") == []
    assert loaded() == []  # no arguments: the same help


def test_a_command_help_loads_its_command_but_not_the_planning_engine() -> None:
    mods = loaded("plan", "--help")
    assert "app.planning" in mods  # its options come from the planning layer
    assert not {"numpy", "optuna", "scipy", "sqlalchemy", "planner.search"} & set(mods)


def test_every_command_is_listed_with_its_own_first_line() -> None:
    for name, (module, line) in lazy.COMMANDS.items():
        command = lazy.build(name)
        assert command is not None, name
        first = inspect.cleandoc(command.help or "").split("\n\n")[0].replace("\n", " ")
        assert first.strip() == line, f"{name} ({module}): update app/cli/lazy.py"


def test_each_module_adds_only_the_commands_listed_for_it() -> None:
    for module in {m for m, _ in lazy.COMMANDS.values()}:
        app = typer.Typer()
        __import__(module, fromlist=["register"]).register(app)
        built = set(typer.main.get_group(app).commands)
        listed = {n for n, (m, _) in lazy.COMMANDS.items() if m == module}
        assert built == listed, module


def _help(env: dict[str, Any], *, typer_draws: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    import app.cli.group as group

    with monkeypatch.context() as patch:
        if typer_draws:
            patch.setattr(group, "can_draw", lambda *args: False)
        result = CliRunner().invoke(cli, ["--help"], env=env)
    assert result.exit_code == 0
    return result.stdout


@pytest.mark.parametrize(
    "env", [{"COLUMNS": "80"}, {"COLUMNS": "50", "FORCE_COLOR": "1"}, {"COLUMNS": "200",
            "FORCE_COLOR": "1"}],
)  # fmt: skip
def test_group_help_is_what_typer_draws(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = _help(env, typer_draws=False, monkeypatch=monkeypatch)
    theirs = _help(env, typer_draws=True, monkeypatch=monkeypatch)
    assert "evaluate" in ours and "Exit codes" in ours
    assert ours == theirs


def test_a_mistyped_command_gets_the_closest_real_one() -> None:
    result = CliRunner().invoke(cli, ["plna"])
    assert result.exit_code == 2
    assert "No such command 'plna'. Did you mean 'plan'?" in " ".join(result.stderr.split())


def test_ctrl_c_while_a_command_is_built_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(name: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(lazy, "build", interrupted)
    result = CliRunner().invoke(cli, ["plan", "--help"])
    assert result.exit_code == 130
    assert result.stderr.strip() == "error: interrupted"
