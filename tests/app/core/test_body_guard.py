"""The body guard (one ASGI layer for the body's size limit, read deadline and input policy):
each protection on its own, driven with raw ASGI messages."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from app.input_policy import BodyGuardMiddleware


async def _echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An app that reads the whole body and answers 200 with its length."""
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


def _run(
    chunks: list[bytes | None], *, media: bytes = b"application/json", timeout_s: float = 1.0
) -> tuple[int, dict[str, Any] | str]:
    """POST ``chunks`` (None: the client stalls there) through the guard; (status, body)."""
    guard = BodyGuardMiddleware(
        _echo, max_body_bytes=100, max_upload_bytes=1000, body_timeout_s=timeout_s
    )
    scope = {"type": "http", "method": "POST", "path": "/v1/evaluations", "query_string": b"",
             "headers": [(b"content-type", media)]}  # fmt: skip
    pending = list(chunks)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        chunk = pending.pop(0) if pending else b""
        if chunk is None:
            await asyncio.sleep(10)
        return {"type": "http.request", "body": chunk or b"", "more_body": bool(pending)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(guard(scope, receive, send), 5))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body) if body.startswith(b"{") else body.decode()


def test_a_stalled_body_is_408_and_a_steady_one_passes() -> None:
    for media in (b"application/json", b"multipart/form-data; boundary=x"):  # read by the app
        status, problem = _run([b"[1,", None, b"2]"], media=media, timeout_s=0.05)
        assert status == 408 and "stalled" in problem["detail"]  # type: ignore[index]
    assert _run([b"[1,", b"2]"], timeout_s=0.05) == (200, "5")


def test_a_body_growing_past_the_limit_is_413_whatever_its_media() -> None:
    for media in (b"application/json", b"multipart/form-data; boundary=x"):
        status, problem = _run([b"[" + b"1," * 40, b"1," * 40 + b"1]"], media=media)
        assert status == 413 and "100 bytes" in problem["detail"]  # type: ignore[index]


def test_the_input_policy_names_the_field() -> None:
    status, problem = _run([b'{"model": "a\\u0000b"}'])
    assert status == 422 and problem["errors"][0]["field"] == "model"  # type: ignore[index]
