"""Typed errors and their rendering as problem JSON (RFC 9457, ``application/problem+json``).

One family, :class:`AppError`, carries its status code; the handlers installed by
:func:`install_error_handlers` turn it, request-validation errors, ``SpecError`` and anything
unexpected into the same problem document, so that no input ever yields a bare 500 page.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.schemas.common import SLUG_PATTERN
from planner.specs import SpecError

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Payload too large",
    408: "Request timeout",
    415: "Unsupported media type",
    422: "Invalid input",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
}


class AppError(Exception):
    """An error the service expects; ``status_code`` says how it is reported."""

    status_code = 400

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code
        self.errors = errors or []
        self.headers = headers or {}


class NotFoundError(AppError):
    status_code = 404


class ConflictError(AppError):
    status_code = 409


class InvalidInputError(AppError):
    status_code = 422

    @classmethod
    def for_field(cls, field: str | None, message: str) -> InvalidInputError:
        return cls(message, errors=[{"field": field or "body", "message": message}])


class UnsupportedMediaError(AppError):
    status_code = 415


class UnavailableError(AppError):
    status_code = 503


class ProblemResponse(JSONResponse):
    """Problem JSON in plain ASCII (non-ASCII escaped): the media type has no charset parameter,
    so clients that guess an encoding could otherwise mangle echoed input."""

    media_type = PROBLEM_MEDIA_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode()


def problem(
    status: int,
    detail: str,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A problem-JSON response."""
    body: dict[str, Any] = {
        "type": f"https://parallel-planner.dev/problems/{status}",
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "errors": errors or [],
    }
    return ProblemResponse(body, status_code=status, headers=headers)


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
    "model_type", "none_required", "string_type", "tuple_type", "set_type",
}  # fmt: skip
# what a union-typed field accepts, where the generic wording ("a string or an object") is vague
_ACCEPTED = {
    "model": "a catalog slug such as llama3.1-70b (lowercase letters, digits, '.', '_', '-') "
    "or an object of model fields",
}
_SLUG_RULE = "a slug: lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"


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


def _loc_to_field(loc: tuple[Any, ...] | list[Any]) -> str:
    head, _, rest = _split_loc(loc)
    return _join(head + rest) or "body"


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
        return f"unknown field {field!r}; remove it (see the schema for accepted fields)"
    if kind == "missing":
        return "a JSON request body is required" if field == "body" else f"{field} is required"
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
    name = field.rsplit(".", 1)[-1]
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


def problem_fields(errors: list[Any]) -> list[dict[str, str]]:
    """Pydantic's errors as ``[{field, message}]``: one entry per field, field names without
    pydantic's union-member tags, each message saying what would be accepted."""
    groups: dict[str, list[tuple[str | None, list[Any], dict[str, Any]]]] = {}
    out: dict[str, dict[str, str]] = {}
    for err in errors:
        if err.get("type") == "json_invalid":
            out.setdefault("body", _json_error(err))
            continue
        head, tag, rest = _split_loc(err.get("loc", ()))
        field = _join(head) if tag is not None else _join(head + rest)
        groups.setdefault(field or "body", []).append((tag, rest, err))
    for field, members in groups.items():
        unions = [(tag, rest, err) for tag, rest, err in members if tag is not None]
        messages = [_message(field, err) for tag, _, err in members if tag is None]
        if unions:
            messages.append(_union_message(field, unions))
        out.setdefault(field, {"field": field, "message": "; ".join(dict.fromkeys(messages))})
    return list(out.values())


def validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    """A request-validation error as ``[{field, message}]`` (see :func:`problem_fields`)."""
    return problem_fields(list(exc.errors()))


async def _app_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AppError)
    return problem(exc.status_code, exc.message, exc.errors, exc.headers)


DATABASE_RETRY_AFTER_S = 5


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot be reached (rather than a bad query)."""
    if isinstance(exc, OperationalError | InterfaceError | PoolTimeout):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    if not is_database_unavailable(exc):
        return await _unexpected(request, exc)
    log.warning(
        "database unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__
    )
    return problem(
        503,
        "the database is not reachable right now; retry shortly",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
    )


async def _spec_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SpecError)
    return problem(422, exc.message, [{"field": exc.field or "body", "message": exc.message}])


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = validation_errors(exc)
    detail = "; ".join(e["message"] for e in errors[:5]) or "the request is not valid"
    return problem(422, detail, errors)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    response = problem(exc.status_code, str(exc.detail))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _too_deep(_: Request, exc: Exception) -> JSONResponse:
    # a parser recursing on hostile nesting is bad input, not a server fault
    message = "the input is nested too deeply to read; flatten it"
    return problem(422, message, [{"field": "body", "message": message}])


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem(500, "an unexpected error occurred; it has been logged")


def install_error_handlers(app: FastAPI) -> None:
    """Render every error the app can raise as problem JSON."""
    app.add_exception_handler(AppError, _app_error)
    app.add_exception_handler(SpecError, _spec_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(PoolTimeout, _database_error)
    app.add_exception_handler(RecursionError, _too_deep)
    app.add_exception_handler(Exception, _unexpected)
