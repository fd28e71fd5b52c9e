"""``--help`` that reads like a manual: INTEGER, PATH, ``[bf16|fp8]``, and the required options.

Typer shows Python type names (``<str>``, ``<bool>``, even for ``--help``) and marks as required
only what click enforces; the planner's own validation (which names the field) decides the rest,
so those options are marked here. :func:`make_help_readable` rewrites the metavars of every
command of a click group in place, once, when the CLI is built.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

# choices the planning layer accepts (app/planning/plan_request.py, planner/specs.py check them);
# "precision" comes from planner.specs when a command is built (_choices: not for `planner --help`)
CHOICES: dict[str, tuple[str, ...]] = {
    "recompute": ("none", "selective", "full"),
    "optimizer_sharding": ("none", "optimizer", "full"),
    "moe_dispatcher": ("alltoall", "flex"),
    "objective": ("throughput", "time_to_train", "cost"),
    "group_by": ("source", "sweep"),
    "kind": ("models", "gpus", "clusters"),
    "log_level": ("debug", "info", "warning", "error"),
}
# commands whose options may take a list of allowed values or a range
LIST_COMMANDS = frozenset({"plan", "submit"})
LIST_CHOICES = frozenset({"recompute", "optimizer_sharding"})
# text options of plan/submit that take one value, a list or a range
MULTI_VALUE = frozenset({"tp", "pp", "vpp", "cp", "ep", "etp", "micro_batch_size"})
RANGE_VALUE = frozenset({"num_gpus", "global_batch_size"})
# what every plan-like command needs (the planning layer rejects a request without them)
REQUIRED = ("model", "gpu", "num_gpus", "seq_length", "global_batch_size")
PLAN_LIKE = frozenset({"plan", "submit", "evaluate", "scale"})
TYPE_NAMES: dict[Any, str] = {int: "INTEGER", float: "FLOAT", str: "TEXT", Path: "PATH"}


def _choices(name: str) -> tuple[str, ...] | None:
    if name == "precision":  # fp16 too: V100s and runs of the fp16 era (Megatron 2021)
        from planner.specs import PRECISION_CHOICES

        return PRECISION_CHOICES
    return CHOICES.get(name)


def _metavar(command: str, param: Any) -> str | None:
    """The readable value type of one option, or None to keep Typer's."""
    if getattr(param, "is_flag", False):
        return ""  # a switch takes no value: show none (not <bool>)
    name = param.name
    known = _choices(name)
    if known is not None and param.type_descriptor.annotation is str:
        choices = "|".join(known)
        many = command in LIST_COMMANDS and name in LIST_CHOICES
        return f"[{choices}],..." if many else f"[{choices}]"
    ranged = command in LIST_COMMANDS | {"scale"} and name in RANGE_VALUE
    if ranged and param.type_descriptor.annotation is str:
        return "N|LIST|LOW-HIGH"
    if command in LIST_COMMANDS and name in MULTI_VALUE:
        return "N|LIST"
    annotation = param.type_descriptor.annotation
    if typing.get_origin(annotation) in (list, tuple):  # a repeatable option: its item's type
        annotation = next(iter(typing.get_args(annotation)), str)
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "PATH"
    return TYPE_NAMES.get(annotation)


def _explain_ranges(command: str, params: list[Any]) -> None:
    from app.cli.ranges import RANGE_RULE

    for param in params:
        ranged = command in LIST_COMMANDS | {"scale"} and param.name in RANGE_VALUE
        text = param.help or ""
        if ranged and param.type_descriptor.annotation is str and text and RANGE_RULE not in text:
            param.help = f"{text} ({RANGE_RULE})"


def _mark_required(command: str, params: list[Any]) -> None:
    if command not in PLAN_LIKE:
        return
    names = {p.name for p in params}
    for param in params:
        if param.name not in REQUIRED or not param.help or "(required" in param.help:
            continue
        if param.name == "gpu" and "cluster" in names:
            param.help += " (required unless --cluster)"
        elif command == "evaluate" and "input" in names:
            param.help += " (required unless --input)"
        else:
            param.help += " (required)"


def _readable_help_option(command: Any) -> None:
    """``--help`` is built lazily by click: give it no value type when it is."""
    original = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = original(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option


def make_help_readable(command: Any, name: str = "") -> None:
    """Rewrite the metavars of ``command`` and, for a group, of all its subcommands."""
    _readable_help_option(command)
    for sub_name, sub in getattr(command, "commands", {}).items():
        make_help_readable(sub, sub_name)
    params = list(getattr(command, "params", []))
    for param in params:
        metavar = _metavar(name, param)
        if param.param_type_name == "argument":
            # an argument is shown by its NAME in the usage line and its type in the table
            param.metavar = param.name.upper()
            if metavar is not None:
                param.display_type_rich = lambda ctx, shown=metavar: shown
        elif metavar is not None:
            param.metavar = metavar
    _explain_ranges(name, params)
    _mark_required(name, params)
