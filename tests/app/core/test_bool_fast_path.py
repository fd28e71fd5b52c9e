"""Bulk bodies (a list of flat records, such as 100 000 layouts) are validated without a Python
call per number field when they hold no boolean in one: strict numbers first (C only), the
boolean-refusing lax schema when that fails. The answer is the same either way: values, errors
and their locations (compared on random rows against the schema without the fast path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, ValidationError
from typing_extensions import TypedDict

import app.core.schemas as schemas
from app.core.schemas import RequestModel


class Row(TypedDict, total=False):
    tp: Annotated[int, Field(ge=1, le=64)]
    share: float
    etp: int | None
    recompute: Literal["none", "full"]
    overlap: bool | None


def _bulk_model(*, fast: bool, calls: list[Any]) -> Any:
    """A request model with ``rows: list[Row]``, built with or without the fast path; every
    per-field boolean check it runs is recorded in ``calls``."""
    checks = schemas._refuse_bool

    def counted(kind: str) -> Callable[[Any], Any]:
        check = checks(kind)

        def run(value: Any) -> Any:
            calls.append(value)
            return check(value)

        return run

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schemas, "_refuse_bool", counted)
        if not fast:
            patch.setattr(schemas, "_flat_records", lambda schema, handler: None)

        class Bulk(RequestModel):
            size: int
            rows: list[Row]

    return Bulk


@pytest.fixture
def models() -> tuple[Any, Any, list[Any]]:
    calls: list[Any] = []
    return _bulk_model(fast=True, calls=calls), _bulk_model(fast=False, calls=[]), calls


def test_a_valid_bulk_body_runs_no_per_field_check(models: tuple[Any, Any, list[Any]]) -> None:
    fast, _, calls = models
    rows = [{"tp": 8, "share": 0.5, "etp": None, "recompute": "full"}] * 1000
    assert fast.model_validate({"size": 3, "rows": rows}).rows[999]["tp"] == 8
    assert calls == [3]  # the one top-level field; none of the 3 000 in the rows


def test_a_boolean_among_many_rows_is_named_with_its_row(
    models: tuple[Any, Any, list[Any]],
) -> None:
    fast, _, _ = models
    rows: list[dict[str, Any]] = [{"tp": 8, "overlap": True}] * 500 + [{"tp": True}]
    with pytest.raises(ValidationError) as caught:
        fast.model_validate({"size": 3, "rows": rows})
    (error,) = caught.value.errors()
    assert error["loc"] == ("rows", 500, "tp") and error["type"] == schemas.BOOL_NOT_NUMBER


def test_numeric_text_in_rows_is_still_a_number(models: tuple[Any, Any, list[Any]]) -> None:
    fast, _, _ = models
    rows = fast.model_validate({"size": "3", "rows": [{"tp": "8", "share": "0.5"}]}).rows
    assert rows == [{"tp": 8, "share": 0.5}]


CELLS = st.sampled_from([1, 8, 0, 65, 8.0, 8.5, "8", "0.5", "x", True, False, None, [], {}])
ROWS = st.lists(
    st.dictionaries(
        st.sampled_from(["tp", "share", "etp", "recompute", "overlap", "other"]),
        st.one_of(CELLS, st.sampled_from(["none", "full"])),
    ),
    max_size=4,
)


FAST, SLOW = _bulk_model(fast=True, calls=[]), _bulk_model(fast=False, calls=[])


def _outcome(model: Any, body: Any) -> Any:
    try:
        return ("ok", model.model_validate(body).model_dump())
    except ValidationError as exc:
        return ("errors", [(e["loc"], e["type"], e["msg"]) for e in exc.errors()])


@settings(max_examples=300, deadline=None)
@given(rows=st.one_of(ROWS, st.sampled_from([None, "rows", [1], [[]]])))
def test_the_fast_path_answers_as_the_checked_schema(rows: Any) -> None:
    body = {"size": 2, "rows": rows}
    assert _outcome(FAST, body) == _outcome(SLOW, body)
