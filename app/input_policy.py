"""One input policy for SQLite and PostgreSQL, enforced at the edge before any route runs.

PostgreSQL refuses NUL characters in text and JSONB (``DataError``: a 500), and JSON has no
NaN or Infinity (PostgreSQL refuses them; SQLite silently reads them back as null). So every
request is checked here, the same way whichever database is behind the service:

* NUL in the path, in a query parameter, in a form field, in a text body (CSV, a log) or in any
  JSON string or object key: 422 naming the field;
* ``NaN``, ``Infinity``, ``-Infinity`` and numbers too large for a double (``1e999``) in a JSON
  body: 422 naming the field;
* JSON nested too deeply for the parser (``RecursionError``, about 1 000 levels), or past
  :data:`MAX_JSON_DEPTH` where the walk runs: 422; a JSON body that is not UTF-8: 422.

The JSON body is parsed once here (off the event loop when large) and handed on unchanged; the
route parses it again with its own schema. Syntax errors are left to the route, whose 422 names
the position. :class:`BodyGuardMiddleware` applies the policy together with the body's size
limit and read deadline, in one ASGI layer.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote_plus

from starlette.concurrency import run_in_threadpool

from app.core.errors import problem
from app.core.middleware import (
    UPLOAD_PATH,
    ASGIApp,
    Message,
    Receive,
    Scope,
    Send,
    _header,
    send_problem,
)
from planner.specs import SpecError

MAX_JSON_DEPTH = 64
"""Deepest JSON nesting a request may have (no request schema nests past about 6)."""
THREADPOOL_BYTES = 64 * 1024
"""Bodies larger than this are parsed in the threadpool, so the event loop keeps serving."""
_NO_BODY = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})


class InputRejected(Exception):
    """A request part the policy refuses; ``field`` names it as the 422 does."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _NonFinite:
    """Stands in for a NaN/Infinity token while parsing, so that the walk can name its field."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _join(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path) or "body"


def _nul(field: str) -> InputRejected:
    return InputRejected(field, f"{field} contains a NUL character (\\u0000); remove it")


def check_json(body: bytes) -> None:
    """Raise :class:`InputRejected` if a JSON body breaks the policy; syntax errors pass."""
    try:
        _load(body)
    except ValueError as exc:
        if isinstance(exc, UnicodeDecodeError):
            raise InputRejected("body", "the body is not UTF-8 text") from exc
        # not JSON: the route's own parser reports where


def load_json_text(text: str, field: str) -> Any:
    """``json.loads`` for JSON pasted into a form: the policy's violations raise ``SpecError``
    naming ``field`` (with the path inside); syntax errors raise ``json.JSONDecodeError``."""
    try:
        return _load(text)
    except InputRejected as exc:
        inner = "" if exc.field == "body" else f" (at {exc.field})"
        raise SpecError(exc.message + inner, field=field) from None


def _load(body: bytes | str) -> Any:
    flagged = False

    def constant(text: str) -> _NonFinite:
        nonlocal flagged
        flagged = True
        return _NonFinite(text)

    def number(text: str) -> float | _NonFinite:
        value = float(text)
        return value if math.isfinite(value) else constant(text)

    def integer(text: str) -> int | _NonFinite:  # only when Python refused one: the slow path
        if len(text.lstrip("-")) <= sys.get_int_max_str_digits():
            return int(text)
        return constant(f"a whole number of {len(text.lstrip('-'))} digits")

    try:
        try:
            data = json.loads(body, parse_constant=constant, parse_float=number)
        except ValueError as exc:  # 10**5000: Python's digit limit, a 400 naming nothing before
            if "int_max_str_digits" not in str(exc):
                raise
            data = json.loads(body, parse_constant=constant, parse_float=number, parse_int=integer)
    except RecursionError as exc:
        raise InputRejected(
            "body", f"the JSON is nested too deeply; at most {MAX_JSON_DEPTH} levels"
        ) from exc
    escaped_nul = b"\\u0000" in body if isinstance(body, bytes) else "\\u0000" in body
    if flagged or escaped_nul:  # the walk costs; most bodies have neither
        _walk(data)
    return data


def _walk(data: Any) -> None:
    """Depth, NUL and non-finite numbers, iteratively (no recursion on hostile depth)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_JSON_DEPTH:
            raise InputRejected(
                _join(path[:3]) + "...",
                f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep",
            )
        if isinstance(value, _NonFinite) and value.text.startswith("a whole number of"):
            field = _join(path)
            raise InputRejected(
                field, f"{field} is {value.text}: far above any limit; send a smaller number"
            )
        if isinstance(value, _NonFinite):
            field = _join(path)
            raise InputRejected(
                field,
                f"{field} is {value.text}: numbers must be finite (JSON has no NaN or "
                "Infinity); send a finite number or leave the field out",
            )
        if isinstance(value, str):
            if "\x00" in value:
                raise _nul(_join(path))
        elif isinstance(value, dict):
            for key, item in value.items():
                if "\x00" in key:
                    raise _nul(_join((*path, key.replace("\x00", "\\u0000"))))
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, i)) for i, item in enumerate(value))


def check_pairs(pairs: list[tuple[str, str]], location: str) -> None:
    for name, value in pairs:
        if "\x00" in name or "\x00" in value:
            raise _nul(f"{location}.{name.replace(chr(0), '')}" if location else name)


def check_form(body: bytes) -> None:
    """A URL-encoded form: a field with NUL is refused, naming it (only such pairs decoded)."""
    for pair in body.split(b"&"):
        if b"%00" in pair or b"\x00" in pair:
            name = unquote_plus(pair.split(b"=", 1)[0].decode("latin-1")).replace("\x00", "")
            raise _nul(name or "body")


def check_text(body: bytes) -> None:
    """A CSV or log body: NUL bytes are refused, naming the line."""
    at = body.find(b"\x00")
    if at >= 0:
        line = body.count(b"\n", 0, at) + 1
        raise InputRejected("body", f"the body contains a NUL byte on line {line}; remove it")


def _checker(media: str) -> Callable[[bytes], None] | None:
    if media in ("", "application/json") or media.endswith("+json"):
        return check_json
    if media == "application/x-www-form-urlencoded":
        return check_form
    if media.startswith("text/"):
        return check_text
    return None  # multipart and binary bodies: the route reads and checks them


class BodyGuardMiddleware:
    """The request body's one guard, in one ASGI layer (three before: size, deadline, policy):

    * size: a declared ``Content-Length`` over the route's limit is a 413 at once; a body that
      grows past it as it arrives is cut (the app sees a disconnect) and answered 413;
    * deadline: each body chunk must arrive within ``body_timeout_s`` of the previous one, else
      the body is cut and answered 408 (slow-body clients hold no connection for long);
    * input policy: NUL in the path or the query, and a JSON, form or text body that breaks the
      policy above, are a 422 naming the field before any route runs.
    """

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, max_upload_bytes: int, body_timeout_s: float
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        limit = self.max_upload_bytes if UPLOAD_PATH.match(path) else self.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await send_problem(send, 413, too_large(limit))
            return
        guard = _BodyStream(receive, limit, self.body_timeout_s)
        app_receive: Receive = guard.receive
        try:
            if "\x00" in path:
                raise _nul("path")
            query = bytes(scope.get("query_string", b""))
            if b"%00" in query or b"\x00" in query:
                check_pairs(parse_qsl(query.decode("latin-1"), keep_blank_values=True), "query")
            media = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
            checker = None if scope.get("method") in _NO_BODY else _checker(media)
            if checker is not None:
                body, disconnected = await _read_body(guard.receive)
                if body and not disconnected:
                    if len(body) > THREADPOOL_BYTES:
                        await run_in_threadpool(checker, body)
                    else:
                        checker(body)
                app_receive = _replay(body, disconnected, guard.receive)
        except InputRejected as exc:
            await problem(422, exc.message, [{"field": exc.field, "message": exc.message}])(
                scope, receive, send
            )
            return
        if guard.failure is not None:  # cut while the policy read it: no route runs
            await send_problem(send, *guard.failure)
            return
        await self._run(scope, app_receive, send, guard)

    async def _run(self, scope: Scope, receive: Receive, send: Send, guard: _BodyStream) -> None:
        replaced = False

        async def replacing_send(message: Message) -> None:
            nonlocal replaced
            if guard.failure is None:
                await send(message)
            elif message["type"] == "http.response.start" and not replaced:
                replaced = True  # the app answered a cut body: the client gets why it was cut
                await send_problem(send, *guard.failure)

        try:
            await self.app(scope, receive, replacing_send)
        except Exception:
            if guard.failure is None:
                raise
        if guard.failure is not None and not replaced:
            await send_problem(send, *guard.failure)


class _BodyStream:
    """``receive`` with the size limit and the read deadline; ``failure`` once it cut the body
    (the status and the message to answer with)."""

    def __init__(self, receive: Receive, limit: int, timeout_s: float) -> None:
        self._receive = receive
        self.limit = limit
        self.timeout_s = timeout_s
        self.received = 0
        self.body_done = False
        self.failure: tuple[int, str] | None = None

    async def receive(self) -> Message:
        if self.failure is not None:
            return {"type": "http.disconnect"}
        if self.body_done or self.timeout_s <= 0:  # after the body: wait for a disconnect
            message = await self._receive()
        else:
            try:
                message = await asyncio.wait_for(self._receive(), self.timeout_s)
            except TimeoutError:
                self.failure = (408, late_body(self.timeout_s))
                return {"type": "http.disconnect"}
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:  # the app sees a disconnect; its answer becomes a 413
                self.failure = (413, too_large(self.limit))
                return {"type": "http.disconnect"}
            if not message.get("more_body", False):
                self.body_done = True
        return message


def late_body(timeout_s: float) -> str:
    return f"the request body stalled for more than {timeout_s:g} s; send it without pauses"


def too_large(limit: int) -> str:
    return f"the request body is over the limit of {limit} bytes; send less (or in parts)"


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The whole body (bounded by the `_BodyStream` it is read through), and whether it was cut."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(parts), True
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts), False


def _replay(body: bytes, disconnected: bool, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            if disconnected:
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
