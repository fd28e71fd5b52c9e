"""The ``planner`` commands, each built when it is run or asked for its own ``--help``.

Building a command imports what its options and code need (pydantic, the planning layer, the
catalog: about half a second in all); ``planner --help`` needs only each command's name and one
line. :data:`COMMANDS` gives those, in the order ``planner --help`` lists them;
tests/app/cli/test_startup.py checks each line against the command's own docstring.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand

from app.cli.help import make_help_readable
from app.cli.number_types import plain_numbers

# command -> (the module whose register() adds it, the first line of its docstring)
COMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": (
        "app.cli.evaluate",
        "Check one layout (or many): Megatron's rules, memory per GPU, speed, launch flags.",
    ),
    "plan": (
        "app.cli.plan",
        "Rank the feasible layouts by predicted speed and print the best with launch flags.",
    ),
    "calibrate": (
        "app.cli.calibrate",
        "Fit the throughput model's coefficients to measured runs; report cross-validated error.",
    ),
    "batch": (
        "app.cli.batch",
        "Plan every job in a file on all cores; a bad job gets an error row, the rest still run.",
    ),
    "batches": (
        "app.cli.batch",
        "List the service's batches, newest first: status, jobs finished and failed, names.",
    ),
    "serve": ("app.cli.service", "Run the HTTP API (migrates and seeds the database at start-up)."),
    "migrate": (
        "app.cli.service",
        "Bring the database (PLANNER_DATABASE_URL) to the latest schema.",
    ),
    "submit": (
        "app.cli.service",
        "Send a plan request to a running server (same options as `planner plan`).",
    ),
    "result": ("app.cli.result", "Show a plan job's status, or its plans once it has succeeded."),
    "worker": (
        "app.cli.worker",
        "Run plan jobs from the database queue until stopped (SIGTERM / Ctrl-C).",
    ),
    "scale": (
        "app.cli.scale",
        "Best plan, tokens/s, scaling efficiency, time to train and cost at each GPU count.",
    ),
    "catalog": ("app.cli.catalog", "Built-in models, GPUs and cluster presets."),
    "keys": ("app.cli.keys", "Create, list and revoke API keys (works on the database directly)."),
}

_BUILT: dict[str, Any] = {}  # one build per process: make_help_readable edits in place


def build(name: str) -> Any:
    """The click command ``name`` (None if there is none), built once from its module."""
    if name not in COMMANDS:
        return None
    if name not in _BUILT:
        module = importlib.import_module(COMMANDS[name][0])
        app = typer.Typer()
        module.register(app)  # a module may add several commands (service: serve, migrate, ...)
        for sub_name, command in typer.main.get_group(app).commands.items():
            make_help_readable(command, sub_name)
            plain_numbers(command)  # '1_6' and 'inf' are not numbers (app/cli/number_types.py)
            _BUILT[sub_name] = command
    return _BUILT[name]


def summary(name: str) -> TyperCommand | None:
    """A stand-in carrying only the name and the line ``planner --help`` shows."""
    if name not in COMMANDS:
        return None
    return TyperCommand(name=name, help=COMMANDS[name][1])
