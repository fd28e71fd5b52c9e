"""Schemas shared by every route: the problem document and pagination."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

PROBLEM_REF = "#/components/schemas/Problem"
SLUG_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,127}$"


def normalize_slug(value: Any) -> Any:
    """References to catalog entries are case-insensitive: a string is stripped and lower-cased
    before the pattern check (``"Llama3.1-70B"`` -> ``"llama3.1-70b"``); anything else is left
    to the type check."""
    return value.strip().lower() if isinstance(value, str) else value


SlugRef = Annotated[str, Field(pattern=SLUG_PATTERN), BeforeValidator(normalize_slug)]
"""A model/GPU/cluster slug given as a reference (compared case-insensitively)."""


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
