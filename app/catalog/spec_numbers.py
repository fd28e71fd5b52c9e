"""The number fields of a user model or GPU spec, read by the plan request's own rule.

A catalog spec is a free-form object (``spec``) that the planner's dataclass checks. Its checks
are the library's: ``"num_layers": "32"`` was "num_layers='32' must be an integer", where the
plan request (and a cluster spec, which is pydantic) reads plain decimal text as the number and
refuses '1_6', 'inf' or ``true`` with "a number is expected" and the fix. This module builds,
per dataclass, a :class:`RequestModel` of its int and float fields, so that a spec's numbers
pass the one rule (``app.core.schemas``) and its errors get the one wording
(``app.core.messages``), each named ``spec.FIELD``. Other fields are left to the dataclass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import ConfigDict, ValidationError, create_model

from app.core.bounds import check_spec_numbers
from app.core.messages import RequestError, problem_fields
from app.core.schemas import RequestModel

_NUMBERS: dict[str, type] = {"int": int, "float": float}


class _SpecNumbers(RequestModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, protected_namespaces=())


def _number_type(annotation: Any) -> tuple[type, bool] | None:
    """(int or float, whether null is taken) of a dataclass field annotated ``int``, ``float``
    or either ``| None`` (a string under ``from __future__ import annotations``); else None."""
    names = [part.strip() for part in str(annotation).split("|")]
    nullable = "None" in names
    rest = [n for n in names if n != "None"]
    if len(rest) != 1 or rest[0] not in _NUMBERS:
        return None
    return _NUMBERS[rest[0]], nullable


_MODELS: dict[str, tuple[type[RequestModel], frozenset[str]]] = {}


def _numbers_model(cls: type[Any]) -> tuple[type[RequestModel], frozenset[str]]:
    """The request model of ``cls``'s number fields, and the names of its int fields (built
    once per dataclass)."""
    key = f"{cls.__module__}.{cls.__qualname__}"
    if key not in _MODELS:
        _MODELS[key] = _build(cls)
    return _MODELS[key]


def _build(cls: type[Any]) -> tuple[type[RequestModel], frozenset[str]]:
    fields: dict[str, Any] = {}
    ints = set()
    for f in dataclasses.fields(cls):
        found = _number_type(f.type)
        if found is None:
            continue
        kind, nullable = found
        # default None is not validated: an explicit null for a non-nullable field is refused
        fields[f.name] = (kind | None if nullable else kind, None)
        if kind is int:
            ints.add(f.name)
    model = create_model(f"{cls.__name__}Numbers", __base__=_SpecNumbers, **fields)
    return model, frozenset(ints)


def spec_numbers(
    cls: type[Any], spec: dict[str, Any], where: str = "spec"
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """(``spec`` with number text read as numbers, ``"32"`` -> 32, and whole floats of int
    fields as ints, ``80e9`` -> 80000000000; the API's problem fields of the numbers that
    break the rule, each named ``where.FIELD`` with the fix). Other values are left as given."""
    model, ints = _numbers_model(cls)
    try:
        read = model.model_validate(spec)
    except ValidationError as exc:
        return spec, problem_fields([{**e, "loc": (where, *e["loc"])} for e in exc.errors()])
    out = dict(spec)
    for name in read.model_fields_set:
        value = spec[name]
        if isinstance(value, str) or (name in ints and isinstance(value, float)):
            out[name] = getattr(read, name)
    return out, []


def read_spec_numbers(cls: type[Any], spec: dict[str, Any], where: str = "spec") -> dict[str, Any]:
    """:func:`spec_numbers`'s spec, or a ``RequestError`` (the API's 422 with every bad
    number's field) for numbers that break the rule or their limit (``app.core.bounds``)."""
    out, errors = spec_numbers(cls, spec, where)
    if not errors:
        try:
            check_spec_numbers(out, where)  # the limits again: the schema saw text, not numbers
        except ValueError as exc:  # "where.NAME=value is above ..." / "where.NAME is above ..."
            field = str(exc).split("=", 1)[0].split(" ", 1)[0]
            errors = [{"field": field, "message": str(exc)}]
    if errors:
        raise RequestError(errors)
    return out
