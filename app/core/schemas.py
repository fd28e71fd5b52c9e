"""Schemas shared by every route: the problem document and pagination."""

from __future__ import annotations

from typing import Annotated, Any, cast

from pydantic import BaseModel, BeforeValidator, Field, GetCoreSchemaHandler
from pydantic_core import PydanticCustomError, SchemaValidator, ValidationError, core_schema

from planner.plain_numbers import read_decimal, too_large

PROBLEM_REF = "#/components/schemas/Problem"
SLUG_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,127}$"


def normalize_slug(value: Any) -> Any:
    """References to catalog entries are case-insensitive: a string is stripped and lower-cased
    before the pattern check (``"Llama3.1-70B"`` -> ``"llama3.1-70b"``); anything else is left
    to the type check."""
    return value.strip().lower() if isinstance(value, str) else value


SlugRef = Annotated[str, Field(pattern=SLUG_PATTERN), BeforeValidator(normalize_slug)]
"""A model/GPU/cluster slug given as a reference (compared case-insensitively)."""


BOOL_NOT_NUMBER = "bool_not_number"
"""Error type of a boolean sent for a number (``app.core.messages`` treats it as a type clash)."""
NUMBER_NOT_TEXT = "number_not_text"
"""Error type of text that is not plain ASCII decimal ('1_6', '٣', 'inf') sent for a number."""
_NON_FINITE = frozenset({"nan", "inf", "infinity"})
_NUMBER_WORDS = {"int": "a whole number such as 8", "float": "a number such as 0.8"}


def _refuse_bool(kind: str) -> core_schema.NoInfoValidatorFunction:
    def check(value: Any) -> Any:
        if isinstance(value, bool):  # pydantic's lax mode would take true as 1
            raise PydanticCustomError(
                BOOL_NOT_NUMBER,
                "got {value}: true/false is not a number; send {expected}",
                {"value": "true" if value else "false", "expected": _NUMBER_WORDS[kind]},
            )
        if isinstance(value, str):  # lax mode reads "1_6" as 16 and "٣" as 3
            return number_text(value, kind)
        return value

    return check


def number_text(value: str, kind: str) -> str:
    """A number sent as text (web forms, CLI flags and batch rows build these models from
    text): plain ASCII decimal only (:mod:`planner.plain_numbers`), else a clash of types."""
    if read_decimal(value) is not None:
        return value
    finite = too_large(value) or value.strip().lower().lstrip("+-") in _NON_FINITE
    raise PydanticCustomError(
        NUMBER_NOT_TEXT,
        "got the text {value}{why}: a number is expected ({expected}; a JSON number, or text "
        "in plain ASCII digits with an optional sign, '.' and exponent)",
        {
            "value": repr(value[:40]),
            "why": ", which is not a finite number" if finite else "",
            "expected": _NUMBER_WORDS[kind],
        },
    )


_MARK = "refuses_bool"
_PLAIN_SCALARS = frozenset({"int", "float", "str", "bool", "literal", "none"})


def _scalar(schema: Any) -> bool:
    """Whether a field schema takes one plain scalar (optional, defaulted or a union of them)."""
    kind = schema.get("type")
    if kind in ("nullable", "default") or _hooked(schema):
        return _scalar(schema["schema"])
    if kind == "union":
        return all(_scalar(c[0] if isinstance(c, tuple) else c) for c in schema["choices"])
    return kind in _PLAIN_SCALARS


def _hooked(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` is the boolean check wrapped around a number schema."""
    return schema.get("type") == "function-before" and bool(
        (schema.get("metadata") or {}).get(_MARK)
    )


def _flat_records(schema: Any, handler: GetCoreSchemaHandler) -> Any:
    """``schema`` with its items resolved if it is a list of typed dicts of plain scalars (bulk
    layouts: no nested container, reference or validator function of their own, so validating
    twice has no side effect), else None."""
    items = schema.get("items_schema") if schema.get("type") == "list" else None
    if isinstance(items, dict) and items.get("type") == "definition-ref":
        items = handler.resolve_ref_schema(items)
    if not isinstance(items, dict) or items.get("type") != "typed-dict":
        return None
    if not all(_scalar(field["schema"]) for field in items["fields"].values()):
        return None
    return {**schema, "items_schema": items}


def _strict_numbers(schema: Any) -> Any:
    """A copy of ``schema`` whose int and float schemas are strict: they refuse booleans (and
    numeric text, 8.0 for an int) in C, and take every other value as the lax ones do."""
    if isinstance(schema, list):
        return [_strict_numbers(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if _hooked(schema):  # the lax check this copy replaces
        return _strict_numbers(schema["schema"])
    out = {key: _strict_numbers(value) for key, value in schema.items()}
    if out.get("type") in _NUMBER_WORDS:
        out["strict"] = True
    return out


def _strict_first(checked: Any, plain: Any, config: Any) -> Any:
    """A list of flat records validated first with strict numbers (no Python call per field;
    it stops at the first error), and with ``checked`` (the boolean-refusing lax schema) when
    that fails: a boolean, numeric text or any other error is reported exactly as before, with
    its location. Strict numbers accept a subset of the lax ones with the same values, so
    what passes is what ``checked`` would give. 100 000 bulk layouts: ~40 ms less."""
    fast = SchemaValidator({**_strict_numbers(plain), "fail_fast": True}, config)

    def validate(value: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> Any:
        try:
            return fast.validate_python(value)
        except ValidationError:
            return handler(value)

    return core_schema.no_info_wrap_validator_function(validate, checked, metadata={_MARK: True})


def _numbers_refuse_bool(
    schema: Any, handler: GetCoreSchemaHandler, seen: set[str], config: Any = None
) -> Any:
    """``schema`` (a pydantic-core schema) with every int and float schema inside it wrapped by
    a check that refuses booleans: in list items, union members, nested models and typed dicts
    (through their definitions), wherever. Changes the definitions it reaches in place."""
    if isinstance(schema, list):
        return [_numbers_refuse_bool(item, handler, seen, config) for item in schema]
    if not isinstance(schema, dict) or (schema.get("metadata") or {}).get(_MARK):
        return schema
    if schema.get("type") == "definition-ref" and schema["schema_ref"] not in seen:
        seen.add(schema["schema_ref"])
        target = cast(dict[str, Any], handler.resolve_ref_schema(schema))
        target.update(_numbers_refuse_bool(dict(target), handler, seen, config))
        return schema
    inner = schema.get("config", config)  # a model's or typed dict's config rules inside it
    out = {key: _numbers_refuse_bool(value, handler, seen, inner) for key, value in schema.items()}
    kind = out.get("type")
    if kind in _NUMBER_WORDS:
        return core_schema.no_info_before_validator_function(
            _refuse_bool(kind), out, metadata={_MARK: True}
        )
    plain = _flat_records(schema, handler)
    if plain is not None:
        return _strict_first(out, plain, config)
    return out


class RequestModel(BaseModel):
    """Base of every request body (API, web form, CLI, batch rows): a boolean is never a count
    or a size, so ``true`` in an integer or float field is a 422 naming the field (pydantic's
    lax mode would read it as 1). Numeric text (``"8"``) is still accepted, as plain ASCII decimal
    only (``"1_6"``, ``"٣"`` and ``"inf"`` are a 422: :func:`number_text`): the web form, CLI
    flags and CSV/YAML batch rows build these same models from text."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[BaseModel], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return _numbers_refuse_bool(handler(source), handler, set())  # type: ignore[no-any-return]


class ProblemField(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details, with the fields to fix in ``errors``."""

    type: str = Field(examples=["https://parallel-planner.dev/problems/422"])
    title: str
    status: int
    detail: str
    errors: list[ProblemField] = Field(default_factory=list)


class Page(BaseModel):
    total: int
    limit: int
    offset: int


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI declarations of the error responses a route can return."""
    descriptions = {
        400: "Bad request",
        401: "No valid API key (send X-API-Key)",
        403: "The API key lacks the scope this route needs",
        404: "Not found",
        409: "Conflict with the current state",
        413: "Payload too large",
        415: "Unsupported media type",
        422: "Invalid input: `errors` names each field and the fix",
        429: "Rate limit exceeded: retry after `Retry-After` seconds",
        503: "Service unavailable (e.g. the database): retry after `Retry-After` seconds",
    }
    return {
        status: {
            "model": Problem,
            "description": descriptions.get(status, "Error"),
            "content": {
                "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
            },
        }
        for status in statuses
    }
