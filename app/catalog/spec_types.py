"""JSON types of a user GPU spec's fields, checked before the domain type is built.

``GPUSpec`` compares its numbers in ``__post_init__``: a string there was a bare TypeError
("'<=' not supported between instances of 'str' and 'int'", naming no field) and ``true``
passed as 1 byte of memory. Model specs check their own types; cluster specs are pydantic.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from app.core.errors import InvalidInputError

_WORDS = {int: "a whole number", float: "a number", bool: "true or false", str: "a string"}


def _accepted(annotation: Any) -> tuple[set[type], bool]:
    """(the plain types a field takes, whether it takes null) from its annotation, a string
    under ``from __future__ import annotations`` ("float | None"); other types: none."""
    names = [part.strip() for part in str(annotation).split("|")]
    plain = {t for t in _WORDS if t.__name__ in names}
    return (plain if len(plain) + ("None" in names) == len(names) else set()), "None" in names


def _fits(value: Any, plain: set[type]) -> bool:
    if isinstance(value, bool):
        return bool in plain
    if isinstance(value, int):
        return bool(plain & {int, float})
    if isinstance(value, float):  # 80e9 is a float in JSON: a whole one is a whole number
        whole = int in plain and value.is_integer()
        return math.isfinite(value) and (float in plain or whole)
    return isinstance(value, str) and str in plain


def check_spec_types(cls: type[Any], spec: dict[str, Any]) -> None:
    """422 naming ``spec.FIELD`` for a value of the wrong JSON type in a dataclass spec:
    a boolean or text for a number, a fraction for a whole number, a number for a flag."""
    for f in dataclasses.fields(cls):
        if f.name not in spec:
            continue
        plain, nullable = _accepted(f.type)
        value = spec[f.name]
        if not plain or (value is None and nullable) or _fits(value, plain):
            continue
        wanted = " or ".join(_WORDS[t] for t in sorted(plain, key=list(_WORDS).index))
        shown = "an object" if isinstance(value, dict) else json.dumps(value)
        shown = "a list" if isinstance(value, list) else shown
        null = " or null" if nullable else ""
        hint = "; send a JSON number, without quotes" if plain & {int, float} else ""
        raise InvalidInputError.for_field(
            f"spec.{f.name}", f"spec.{f.name} must be {wanted}{null} (got {shown}){hint}"
        )
