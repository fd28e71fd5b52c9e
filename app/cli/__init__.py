"""The ``planner`` command line: evaluate, plan, catalog, calibrate, and the service commands.

Heavy imports (numpy models, optuna, the web stack) happen inside the commands, so that
``planner --help`` and a plan both start fast.
"""

from __future__ import annotations

import sys

from app.cli.errors import EXIT_CODES_HELP, EXIT_INTERRUPTED

try:  # Ctrl-C while these load (about a second: numpy, pydantic, optuna) ends as any other does
    import typer

    from app.cli import (
        batch,
        calibrate,
        catalog,
        evaluate,
        keys,
        plan,
        result,
        scale,
        service,
        worker,
    )
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
    cls=PlannerGroup,  # readable --help, one-line errors (app/cli/errors.py)
    epilog=EXIT_CODES_HELP,
)
evaluate.register(cli)
plan.register(cli)
catalog.register(cli)
calibrate.register(cli)
batch.register(cli)
keys.register(cli)
service.register(cli)  # serve, migrate, submit
result.register(cli)  # the plans of a submitted job
worker.register(cli)
scale.register(cli)


def main() -> None:
    import logging

    logging.getLogger("optuna").setLevel(logging.WARNING)  # no "A new study created" chatter
    try:
        cli()
    except KeyboardInterrupt:  # while click parses, before a command's own handler is on
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
