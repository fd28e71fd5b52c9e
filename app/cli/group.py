"""The ``planner`` command group: readable ``--help`` and clean errors for every command.

Typer builds this class for the top-level app (``typer.Typer(cls=PlannerGroup)``), both from
:func:`app.cli.main` and from ``typer.testing.CliRunner``, so the tests see what users see.
Its commands are built on first use (app/cli/lazy.py), so that ``planner --help`` starts fast.
"""

from __future__ import annotations

from typing import Any

from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption, UsageError
from typer.core import HAS_RICH, TyperGroup

from app.cli import lazy
from app.cli.errors import CleanErrors
from app.cli.group_help import can_draw, print_group_help
from app.cli.help import make_help_readable
from app.cli.number_types import plain_numbers
from app.cli.suggest import closest, did_you_mean, suggest_options


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

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as exc:  # Typer's suggestion looks at self.commands: empty until built
            names = closest(args[0], self.list_commands(ctx)) if args else []
            if names:
                exc.message = f"{exc.message.rstrip('.')}. {did_you_mean([repr(n) for n in names])}"
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except NoSuchOption as exc:  # any command's unknown option (app/cli/suggest.py)
            suggest_options(exc)
            raise

    def _draws_own_help(self, ctx: Any) -> bool:
        return HAS_RICH and self.rich_markup_mode == "rich" and can_draw(self, ctx)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        bare = not args and self.no_args_is_help and not ctx.resilient_parsing
        if bare and self._draws_own_help(ctx):  # Typer's NoArgsIsHelpError loads its help module
            self.format_help(ctx, None)
            ctx.exit(NoArgsIsHelpError.exit_code)  # 2, as Typer exits
        return super().parse_args(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            if self._draws_own_help(ctx):
                # Typer's help module alone would double the start-up (app/cli/group_help.py)
                names = self.list_commands(ctx)
                print_group_help(self, ctx, [self.get_command(ctx, name) for name in names])
            else:
                super().format_help(ctx, formatter)
        finally:
            self._listing = False
