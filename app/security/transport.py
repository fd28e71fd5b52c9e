"""Read deadlines: a connection that sends its headers, or its body, too slowly is dropped.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) but waits forever for the
headers of a request that has started, so a few hundred slow clients hold every connection
(slowloris). Two guards, used by ``planner serve``:

* :class:`DeadlineH11Protocol` - uvicorn's h11 protocol with a deadline on the request head:
  a client whose request line and headers are not complete ``PLANNER_HEADER_TIMEOUT_S`` seconds
  after the connection opened (or after the previous response) is disconnected;
* a cap on the request head: a request line and headers over :data:`MAX_HEAD_BYTES` get 431
  (h11's ``max_incomplete_event_size`` bounds only a head still arriving, not one that comes
  whole in a single read: 100 KB of headers were served);
* the body's read deadline (each chunk within ``body_timeout_s`` of the previous one, else
  408) is part of :class:`app.input_policy.BodyGuardMiddleware`.

Behind a reverse proxy (nginx ``client_header_timeout`` / ``client_body_timeout``) the proxy
does the same earlier; these guards make the service safe on its own too.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_ENV = "PLANNER_HEADER_TIMEOUT_S"
DEFAULT_HEADER_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 64 * 1024
"""The most bytes a request line and its headers may take (the README's 64 KiB)."""


class DeadlineH11Protocol(H11Protocol):
    """``H11Protocol`` that drops a connection whose request head is late (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # read here, not from Settings: uvicorn builds this class in each worker process
        self.header_timeout_s = float(os.environ.get(HEADER_TIMEOUT_ENV, DEFAULT_HEADER_TIMEOUT_S))
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_tail = b""

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._head_over_limit(data):
            self.logger.warning("refused a request whose headers are over %d bytes", MAX_HEAD_BYTES)
            self._refuse_head()
            return
        super().data_received(data)

    def _head_over_limit(self, data: bytes) -> bool:
        """Whether the head being received (this chunk added) is over MAX_HEAD_BYTES; the last
        3 bytes are kept so that a blank line split across two reads is still found."""
        seen = self._head_tail + data
        end = seen.find(b"\r\n\r\n")
        if end < 0:
            self._head_bytes += len(data)
            self._head_tail = seen[-3:]
            return self._head_bytes > MAX_HEAD_BYTES
        size = self._head_bytes + end + 4 - len(self._head_tail)
        self._head_bytes, self._head_tail = 0, b""  # the head is complete: the next one counts anew
        return size > MAX_HEAD_BYTES

    def _refuse_head(self) -> None:
        detail = f"the request line and headers are over {MAX_HEAD_BYTES} bytes; send less"
        body = json.dumps(
            {
                "type": "https://parallel-planner.dev/problems/431",
                "title": "Request header fields too large",
                "status": 431,
                "detail": detail,
                "errors": [],
            }
        ).encode()
        head = (
            "HTTP/1.1 431 Request Header Fields Too Large\r\n"
            "content-type: application/problem+json\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        # IDLE: the client has not finished a request head since the connection (or the last
        # response) began; SEND_BODY and DONE mean the head arrived in time
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.warning("dropped a connection whose request headers were too slow")
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this keep-alive connection gets its own deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
