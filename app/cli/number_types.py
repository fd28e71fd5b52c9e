"""Number options read as plain ASCII decimal, like every other door numbers enter by.

Typer coerces an ``int`` / ``float`` option through pydantic's lax mode, which reads '1_6' as
16 (and, for a float, 'inf' / 'nan'); ``planner plan --seq-length 1_6`` then planned a 16-token
sequence. :func:`plain_numbers` puts a check in front of every such option of a command tree:
the text must be what :mod:`planner.plain_numbers` reads (the web forms, the measurement files
and the API's numeric strings use the same reading), then Typer converts it as before.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import typer

from planner.plain_numbers import DECIMAL_FORM, WHOLE_FORM, read_decimal, read_whole


def _number_kind(annotation: Any) -> type | None:
    """int or float where the option takes numbers (also optional and list-valued), else None."""
    if annotation in (int, float):
        return typing.cast(type, annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple):
        kinds = {_number_kind(arg) for arg in typing.get_args(annotation)} - {None}
        if len(kinds) == 1:
            return kinds.pop()
    return None


def _plain(text: str, kind: type) -> bool:
    if kind is int:  # a sign is left to the option's own range check
        return read_whole(text.strip().lstrip("+-")) is not None
    return read_decimal(text) is not None


def _checked(kind: type, process: Any) -> Any:
    def process_value(ctx: Any, value: Any) -> Any:
        texts = value if isinstance(value, list | tuple) else [value]
        for text in texts:
            if isinstance(text, str) and not _plain(text, kind):
                form = WHOLE_FORM if kind is int else DECIMAL_FORM
                raise typer.BadParameter(f"{text!r} is not a number: write it in {form}", ctx)
        return process(ctx, value)

    return process_value


def plain_numbers(command: Any) -> None:
    """Check the number options of ``command`` and, for a group, of all its subcommands."""
    for sub in getattr(command, "commands", {}).values():
        plain_numbers(sub)
    for param in getattr(command, "params", []):
        descriptor = getattr(param, "type_descriptor", None)
        kind = _number_kind(getattr(descriptor, "annotation", None))
        if kind is not None:
            param.process_value = _checked(kind, param.process_value)
