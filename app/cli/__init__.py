"""The ``planner`` command line: evaluate, plan, catalog, calibrate, and the service commands.

Each command is built when it is run or asked for its ``--help`` (app/cli/lazy.py), and heavy
imports (numpy, optuna, the web stack) happen inside the commands, so that ``planner --help``
and a plan both start fast.
"""

from __future__ import annotations

import sys

from app.cli.errors import EXIT_CODES_HELP, EXIT_INTERRUPTED

try:  # Ctrl-C while typer loads ends as any other does
    import typer

    from app.cli.group import PlannerGroup
except KeyboardInterrupt:
    sys.stderr.write("error: interrupted\n")
    raise SystemExit(EXIT_INTERRUPTED) from None

cli = typer.Typer(
    name="planner",
    help="Find the fastest Megatron-LM parallel layout that fits in GPU memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=PlannerGroup,  # readable --help, one-line errors, commands built on use (app/cli/lazy.py)
    epilog=EXIT_CODES_HELP,
)


@cli.callback()
def _planner() -> None:
    # the commands come from PlannerGroup (app/cli/lazy.py); a callback makes Typer build a group
    return None


def main() -> None:
    import logging

    logging.getLogger("optuna").setLevel(logging.WARNING)  # no "A new study created" chatter
    try:
        cli()
    except KeyboardInterrupt:  # while click parses, before a command's own handler is on
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
