"""Pydantic validation errors as messages a person can act on, naming the field as they typed it.

One wording for every interface: the API's 422 problems (``field`` is the JSON path), the CLI
(``--num-gpus``), ``planner evaluate --input`` lines (the JSON key) and batch rows (the column).
Pure pydantic, so that the CLI can use it without loading the web stack.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from app.core.megatron_names import unknown_field_hint
from app.core.schemas import BOOL_NOT_NUMBER, NUMBER_NOT_TEXT, SLUG_PATTERN
from planner.specs import SpecError

_LOCATIONS = {"body", "query", "path", "header", "cookie"}
_TYPE_TAGS = {
    "any", "bool", "bytes", "date", "datetime", "decimal", "dict", "float", "frozenset",
    "int", "json", "list", "none", "set", "str", "time", "timedelta", "tuple", "url", "uuid",
}  # fmt: skip
_TAG_PREFIXES = (  # pydantic-core schema names: a '-' that no Python field name has
    "constrained-", "function-", "json-or-python", "lax-or-strict", "is-instance",
    "tagged-union", "model-fields", "typed-dict",
)  # fmt: skip
# errors that only say "this union member does not apply" (the input has another JSON type)
_TYPE_MISMATCHES = {
    "bool_parsing", "bool_type", "bytes_type", "dict_type", "float_parsing", "float_type",
    "int_parsing", "int_type", "is_instance_of", "list_type", "model_attributes_type",
    "model_type", "none_required", "string_type", "tuple_type", "set_type", BOOL_NOT_NUMBER,
    NUMBER_NOT_TEXT,
}  # fmt: skip
# what a union-typed field accepts, where the generic wording ("a string or an object") is vague
_ACCEPTED = {
    "model": "a catalog slug such as llama3.1-70b (lowercase letters, digits, '.', '_', '-') "
    "or an object of model fields",
}
_OPTION_LISTS = ("num_gpus", "global_batch_size")
"""Fields whose several values a plan request takes as ``<field>_options``."""
_SLUG_RULE = (  # SLUG_PATTERN in words, its length too: a 200-letter name breaks only that
    "a slug: lowercase letters, digits, '.', '_' or '-', starting with a letter or digit, "
    "at most 128 characters"
)


class RequestError(SpecError):
    """A request that does not validate: every bad field, named as the user typed it."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        message = "; ".join(e["message"] for e in errors[:5]) or "the request is not valid"
        super().__init__(message, field=errors[0]["field"] if errors else None)
        self.errors = errors


def _is_union_tag(part: Any) -> bool:
    """Whether a ``loc`` segment names a union member (``constrained-str``, ``dict[str,any]``)
    rather than a field name or a list index."""
    if not isinstance(part, str):
        return False
    return "[" in part or part in _TYPE_TAGS or part.startswith(_TAG_PREFIXES)


def _join(parts: list[Any]) -> str:
    return ".".join(str(p) for p in parts)


def _split_loc(loc: tuple[Any, ...] | list[Any]) -> tuple[list[Any], str | None, list[Any]]:
    """``(field path, first union-member tag or None, path inside that member)``, without the
    ``body``/``query``/... prefix and without union-member tags."""
    parts = list(loc)
    if len(parts) > 1 and parts[0] in _LOCATIONS:
        parts = parts[1:]
    for i, part in enumerate(parts):
        if _is_union_tag(part):
            rest = [p for p in parts[i + 1 :] if not _is_union_tag(p)]
            return parts[:i], part, rest
    return parts, None, []


def _describe_tag(tag: str) -> str:
    """``constrained-int`` -> "an integer", ``list[constrained-int]`` -> "a list of integers"."""
    inner = tag
    while inner.startswith("function-") and inner.endswith("]") and "[" in inner:
        inner = inner[inner.index("[") + 1 : -1].rsplit(", ", 1)[-1]  # the wrapped schema
    inner = inner.removeprefix("constrained-")
    if inner.startswith(("list[", "tuple[", "set[")) and inner.endswith("]"):
        item = _describe_tag(inner[inner.index("[") + 1 : -1])
        for article in ("an ", "a "):
            item = item.removeprefix(article)
        return f"a list of {item}s"
    if inner.startswith("literal[") and inner.endswith("]"):
        return f"one of {inner[8:-1]}"
    names = {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "bool": "true or false",
        "none": "null",
        "dict": "an object",
    }
    return names.get(inner.split("[", 1)[0], inner)


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(field: str, err: dict[str, Any]) -> str:
    kind = err.get("type")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        hint = unknown_field_hint(field)  # a Megatron argument name: the field that says it
        return hint or f"unknown field {field!r}; remove it (see the schema for accepted fields)"
    if kind == "missing":
        return "a JSON request body is required" if field == "body" else f"{field} is required"
    if field == "body" and kind in ("model_attributes_type", "model_type", "dict_type"):
        given = err.get("input")
        if isinstance(given, str | bytes):  # HTTP: sent without Content-Type: application/json
            return (
                "the body must be a JSON object of the request's fields, sent with "
                "Content-Type: application/json"
            )
        return f"the request must be a JSON object of its fields (got {_shown(given)})"
    given = err.get("input")
    several = (kind == "int_type" and isinstance(given, list)) or (
        kind in ("int_parsing", NUMBER_NOT_TEXT)
        and isinstance(given, str)
        and any(c in given for c in ",-")
    )  # a list, or the CLI's text forms '64,128' / '64-512'
    name = field.rsplit(".", 1)[-1]  # a batch's jobs.3.num_gpus is num_gpus too
    if several and name in _OPTION_LISTS:
        return (  # "a valid integer" does not say where several values go
            f"{field} takes one number; a plan request (POST /v1/plan-jobs, /v1/scaling-curves) "
            f"takes several as {name}_options"
        )
    if kind == "int_parsing_size":  # 1e30 for an integer: pydantic says "input string"
        return f"{field} is too large (got {_shown(err.get('input'))}); see its limit in the schema"
    if kind == "float_type" and isinstance(given, int) and not isinstance(given, bool):
        digits = int(given.bit_length() * 0.30103) + 1  # 10**400: no float holds it
        return f"{field} is too large (got a number of about {digits} digits); see its limit"
    if kind == "string_pattern_mismatch" and ctx.get("pattern") == SLUG_PATTERN:
        return f"{field} must be {_SLUG_RULE} (got {_shown(err.get('input'))})"
    message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    return message if message.startswith(f"{field}.") else f"{field}: {message}"


def _json_error(err: dict[str, Any]) -> dict[str, str]:
    ctx = err.get("ctx") or {}
    loc = list(err.get("loc", ()))
    reason = str(ctx.get("error") or err.get("msg") or "malformed JSON")
    where = f" at position {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
    return {"field": "body", "message": f"the body is not valid JSON: {reason}{where}"}


def _union_message(field: str, errors: list[tuple[str, list[Any], dict[str, Any]]]) -> str:
    """One message for the errors of every member of a union-typed field."""
    name = field.rsplit(".", 1)[-1].lstrip("-").replace("-", "_")  # a label: --model
    accepted = _ACCEPTED.get(name)
    if accepted is None:
        kinds = list(dict.fromkeys(_describe_tag(tag) for tag, _, _ in errors))
        accepted = ", ".join(kinds[:-1]) + (" or " if len(kinds) > 1 else "") + kinds[-1]
    details = []
    for _, rest, err in errors:
        if err.get("type") in _TYPE_MISMATCHES:
            continue  # the input is not of this member's type: said by "must be ..."
        if err.get("type") == "string_pattern_mismatch" and name in _ACCEPTED:
            continue  # the accepted forms describe the pattern
        details.append(_message(_join([field, *rest]), err))
    message = f"{field} must be {accepted}"
    if details:
        return message + "; " + "; ".join(dict.fromkeys(details))
    return f"{message} (got {_shown(errors[0][2].get('input'))})"


def problem_fields(
    errors: list[Any], label: Callable[[str], str] | None = None
) -> list[dict[str, str]]:
    """Pydantic's errors as ``[{field, message}]``: one entry per field, field names without
    pydantic's union-member tags, each message saying what would be accepted. ``label`` names a
    field as the user typed it (a CLI flag, a CSV column); the API keeps the JSON path."""
    groups: dict[str, list[tuple[str | None, list[Any], dict[str, Any]]]] = {}
    out: dict[str, dict[str, str]] = {}
    for err in errors:
        if err.get("type") == "json_invalid":
            out.setdefault("body", _json_error(err))
            continue
        head, tag, rest = _split_loc(err.get("loc", ()))
        field = _join(head) if tag is not None else _join(head + rest)
        groups.setdefault(field or "body", []).append((tag, rest, err))
    for path, members in groups.items():
        field = label(path) if label is not None and path != "body" else path
        unions = [(tag, rest, err) for tag, rest, err in members if tag is not None]
        messages = [_message(field, err) for tag, _, err in members if tag is None]
        if unions:
            messages.append(_union_message(field, unions))
        out.setdefault(field, {"field": field, "message": "; ".join(dict.fromkeys(messages))})
    return list(out.values())
