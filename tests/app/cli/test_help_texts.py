"""Every ``planner`` command's ``--help``: each option says what it is, value types are words a
person reads (not ``<list[Path]>``), no reStructuredText leaks, no default contradicts its help."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli import cli, lazy

PYTHON_TYPE = re.compile(r"<[A-Za-z_][\w\[\], .|]*>")


def _commands() -> Iterator[tuple[list[str], Any]]:
    for name in lazy.COMMANDS:
        command = lazy.build(name)
        subs = getattr(command, "commands", None)
        if subs:
            yield from (([name, sub], c) for sub, c in subs.items())
        else:
            yield [name], command


COMMANDS = list(_commands())
IDS = [" ".join(path) for path, _ in COMMANDS]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_every_option_has_help_text(path: list[str], command: Any) -> None:
    silent = [p.opts[0] for p in command.params if not (p.help or "").strip()]
    assert not silent, f"planner {' '.join(path)}: no help for {silent}"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_help_reads_as_text(path: list[str], command: Any) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert not PYTHON_TYPE.findall(result.stdout), PYTHON_TYPE.findall(result.stdout)
    assert "``" not in result.stdout  # a docstring's reStructuredText, shown raw
    assert not re.search(r"\(default: [^)]*\)\.?\s*\[default: ", result.stdout)


def test_shared_cluster_help_names_flags_not_api_fields() -> None:
    result = CliRunner().invoke(cli, ["plan", "--help"], env={"COLUMNS": "200"})
    assert "nic_bandwidth_bytes_per_s" not in result.stdout
    assert "--nic-bandwidth-bytes-per-s it sets" in result.stdout
