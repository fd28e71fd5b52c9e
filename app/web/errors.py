"""HTML error pages for the web UI: an unknown URL or a failing page gets a page, not JSON.

The JSON API keeps its problem JSON: each of the app's error handlers still builds the response
(status, message, headers such as Retry-After); for a request that is not an API call and that
a browser made, the problem's title and detail are rendered into ``error.html`` instead.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.responses import Response

API_PREFIXES = ("/v1/", "/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc")
"""Paths whose errors stay problem JSON whoever asks (the API and its machine endpoints)."""

Handler = Callable[[Request, Exception], Awaitable[Response]]


def wants_html(request: Request) -> bool:
    """A browser asking for a page: not an API path, and HTML among what it accepts."""
    path = request.url.path
    if path == "/v1" or path.startswith(API_PREFIXES):
        return False
    return "text/html" in request.headers.get("accept", "")


def _problem(response: Response) -> dict[str, Any]:
    try:
        body = json.loads(bytes(response.body))
    except (ValueError, TypeError):
        return {}
    return body if isinstance(body, dict) else {}


def _html_or(handler: Handler) -> Handler:
    async def handle(request: Request, exc: Exception) -> Response:
        response = await handler(request, exc)
        if response.status_code < 400 or not wants_html(request):
            return response
        from app.web.templating import templates

        body = _problem(response)
        status = response.status_code
        message = str(body.get("detail") or "")
        if status == 404 and message.lower() == "not found":  # the router's bare default
            message = f"There is no page at {request.url.path}."
        page = templates(request.app).TemplateResponse(
            request,
            "error.html",
            {
                "status": status,
                "title": body.get("title") or "Error",
                "message": message,
                "errors": body.get("errors") or [],
            },
            status_code=status,
        )
        for name in ("retry-after", "www-authenticate", "allow"):
            if name in response.headers:
                page.headers[name] = response.headers[name]
        return page

    return handle


def install_html_error_pages(app: FastAPI) -> None:
    """Wrap each installed error handler so browsers get an HTML page (call after installing
    the JSON handlers)."""
    for exc_class, handler in list(app.exception_handlers.items()):
        # every handler install_error_handlers adds is async (app/core/errors.py)
        app.add_exception_handler(exc_class, _html_or(cast(Handler, handler)))
