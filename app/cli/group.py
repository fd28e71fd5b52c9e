"""The ``planner`` command group: readable ``--help`` and clean errors for every command.

Typer builds this class for the top-level app (``typer.Typer(cls=PlannerGroup)``), both from
:func:`app.cli.main` and from ``typer.testing.CliRunner``, so the tests see what users see.
Its commands are built on first use (app/cli/lazy.py), so that ``planner --help`` starts fast.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

from app.cli import lazy
from app.cli.errors import CleanErrors
from app.cli.help import make_help_readable
from app.cli.number_types import plain_numbers


class PlannerGroup(CleanErrors, TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        make_help_readable(self)
        plain_numbers(self)  # '1_6' and 'inf' are not numbers (app/cli/number_types.py)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.commands, *(name for name in lazy.COMMANDS if name not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if self._listing:  # the command list of `planner --help`: name and one line suffice
            return lazy.summary(cmd_name)
        return lazy.build(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
