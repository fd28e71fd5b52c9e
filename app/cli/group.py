"""The ``planner`` command group: readable ``--help`` and clean errors for every command.

Typer builds this class for the top-level app (``typer.Typer(cls=PlannerGroup)``), both from
:func:`app.cli.main` and from ``typer.testing.CliRunner``, so the tests see what users see.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

from app.cli.errors import CleanErrors
from app.cli.help import make_help_readable
from app.cli.number_types import plain_numbers


class PlannerGroup(CleanErrors, TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        make_help_readable(self)
        plain_numbers(self)  # '1_6' and 'inf' are not numbers (app/cli/number_types.py)
