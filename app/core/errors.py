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

from app.core.messages import problem_fields
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
