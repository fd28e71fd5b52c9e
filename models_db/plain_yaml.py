"""YAML and JSON files read with the project's one number rule (planner/plain_numbers.py).

PyYAML reads unquoted scalars by YAML 1.1: ``1_000`` is 1000, ``0x10`` 16, ``017`` 15 (octal),
``1:30`` 90 (base 60), ``.inf`` infinity, while ``1e3`` stays text; Python's json reads ``NaN``
and ``Infinity``. A jobs file that says ``num_gpus: 1_000`` was planned with 1000 GPUs before
anyone saw the text. Here an unquoted scalar in plain ASCII decimal is a number (an int when
whole: ``1000``, ``-8``, ``017`` = 17; else a float: ``0.5``, ``1e3``, ``.5``); one that YAML
1.1 or 1.2 would read as a number in any other form is refused with its key and line, and the
rest resolves as ``yaml.safe_load`` does (booleans, null, dates, text). Quoting a scalar keeps
it text, as YAML always did.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from planner.plain_numbers import DECIMAL, IN_DECIMAL_DIGITS, SIGNED_WHOLE, read_decimal

INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
NOT_PLAIN_TAG = "tag:planner,2026:not-plain-number"
DIGITS = "-+0123456789"


class NumberFormError(ValueError):
    """A number written in a form the one number rule does not read; names where it is."""

    def __init__(self, text: str, where: str, key: str | None) -> None:
        self.text, self.where, self.key = text, where, key
        super().__init__(
            f"{where}: {text!r} is not a plain number: write it {IN_DECIMAL_DIGITS} (such as "
            "1000, 0.5 or 1e3), or quote it if it is text"
        )


@dataclass(frozen=True, slots=True)
class _NotPlain:
    """A scalar YAML/JSON would read as a number, kept with its line until its key is known."""

    text: str
    line: int | None


def _yaml11_number_patterns() -> list[str]:
    """PyYAML's own int and float patterns: whatever it would have made a number."""
    found = {
        regexp.pattern
        for resolvers in yaml.SafeLoader.yaml_implicit_resolvers.values()
        for tag, regexp in resolvers
        if tag in (INT_TAG, FLOAT_TAG)
    }
    return sorted(found)


class PlainNumberLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the int/float resolvers of the one number rule."""


PlainNumberLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (INT_TAG, FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
PlainNumberLoader.add_implicit_resolver(INT_TAG, re.compile(f"^{SIGNED_WHOLE.pattern}$"), DIGITS)
PlainNumberLoader.add_implicit_resolver(FLOAT_TAG, re.compile(f"^{DECIMAL.pattern}$"), DIGITS + ".")
# YAML 1.1's numbers (1_000, 0x1f, 0b101, 1:30, .inf, .nan) and YAML 1.2's 0o17: refused below
_NUMBER_LIKE = "|".join([*_yaml11_number_patterns(), r"^[-+]?0o[0-7]+$"])
PlainNumberLoader.add_implicit_resolver(
    NOT_PLAIN_TAG,
    re.compile(_NUMBER_LIKE, re.X),
    DIGITS + ".",  # re.X: PyYAML writes them so
)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | _NotPlain:
    text = str(loader.construct_scalar(node))
    if SIGNED_WHOLE.fullmatch(text):  # '017' is 17: a decimal, not YAML 1.1's octal 15
        return int(text)
    return _NotPlain(text, node.start_mark.line + 1)  # an explicit !!int 0x10


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float | _NotPlain:
    text = str(loader.construct_scalar(node))
    value = read_decimal(text)  # None for '1e999' (infinite) and an explicit !!float .inf
    return _NotPlain(text, node.start_mark.line + 1) if value is None else value


def _construct_not_plain(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> _NotPlain:
    return _NotPlain(str(loader.construct_scalar(node)), node.start_mark.line + 1)


PlainNumberLoader.add_constructor(INT_TAG, _construct_int)
PlainNumberLoader.add_constructor(FLOAT_TAG, _construct_float)
PlainNumberLoader.add_constructor(NOT_PLAIN_TAG, _construct_not_plain)


def _refused(item: _NotPlain, path: list[str | int], *, is_key: bool = False) -> NumberFormError:
    at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    key = next((p for p in reversed(path) if isinstance(p, str)), None)
    if is_key:
        where = "a key" + (f" in {at}" if at else "")
    else:
        where = (f"key {key!r}" if key is not None else "a value") + (
            f" at {at}" if at and at != key else ""
        )
    line = f" (line {item.line})" if item.line else ""
    return NumberFormError(item.text, where + line, key)


def _check(data: Any, path: list[str | int]) -> Any:
    """``data`` with every number checked; NumberFormError for the first one refused."""
    if isinstance(data, _NotPlain):
        raise _refused(data, path)
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, _NotPlain):
                raise _refused(key, path, is_key=True)
            _check(value, [*path, str(key)])
    elif isinstance(data, list):
        for index, item in enumerate(data):
            _check(item, [*path, index])
    return data


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with plain-decimal numbers; NumberFormError names a refused one's key
    (yaml.YAMLError for text that is not YAML at all, as safe_load raises)."""
    return _check(yaml.load(text, Loader=PlainNumberLoader), [])  # a SafeLoader subclass


def load_json(text: str) -> Any:
    """``json.loads`` without Python's NaN/Infinity extensions (not JSON, not numbers here)."""
    return _check(json.loads(text, parse_constant=lambda word: _NotPlain(word, None)), [])
