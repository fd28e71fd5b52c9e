"""The request head is capped at 64 KiB however it arrives (README, *Browser and transport*).
QA round 9: h11's ``max_incomplete_event_size`` bounds only a head still arriving, so 100 KB
of headers sent in one write were served."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI

from app.security.transport import MAX_HEAD_BYTES, DeadlineH11Protocol
from tests.app.live import live_server


@pytest.fixture
def server(make_app: Callable[..., FastAPI], database_url: str) -> Iterator[tuple[str, int]]:
    if not database_url.startswith("sqlite"):
        pytest.skip("transport, not the database")
    # as `planner serve` runs it (app/cli/service.py): h11 buffers up to 64 KiB of a head
    config = {"http": DeadlineH11Protocol, "h11_max_incomplete_event_size": MAX_HEAD_BYTES}
    with live_server(make_app(), **config) as address:
        yield address


def _exchange(address: tuple[str, int], *chunks: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as conn:
        for chunk in chunks:
            conn.sendall(chunk)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
            part = conn.recv(65536)
            if not part:
                break
            answer += part
        return answer


def _request(header_bytes: int) -> bytes:
    return b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * header_bytes + b"\r\n\r\n"


@pytest.mark.parametrize("size", [MAX_HEAD_BYTES + 100, 2 * MAX_HEAD_BYTES])
def test_a_head_over_the_cap_in_one_write_is_431(server: tuple[str, int], size: int) -> None:
    answer = _exchange(server, _request(size))
    status, _, body = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 431"), status
    problem = json.loads(body)
    assert problem["status"] == 431 and str(MAX_HEAD_BYTES) in problem["detail"]


def test_a_head_over_the_cap_in_many_writes_is_cut(server: tuple[str, int]) -> None:
    """Answered 431 once the cap is passed; a client still writing may see the reset first."""
    request = _request(MAX_HEAD_BYTES + 100)
    chunks = [request[i : i + 1000] for i in range(0, len(request), 1000)]
    try:
        answer = _exchange(server, *chunks)
    except (ConnectionResetError, BrokenPipeError):
        return  # the server closed the connection before the whole head was sent
    assert answer.startswith(b"HTTP/1.1 431"), answer[:80]


def test_heads_under_the_cap_are_served_and_kept_alive(server: tuple[str, int]) -> None:
    request = _request(MAX_HEAD_BYTES - 200)
    split = request.index(b"\r\n\r\n") + 2  # the blank line split across two writes
    first = _exchange(server, request[:split], request[split:])
    assert first.startswith(b"HTTP/1.1 200"), first[:80]
    with socket.create_connection(server, timeout=10) as conn:
        for _ in range(3):  # one connection, three heads: each counted on its own
            conn.sendall(_request(MAX_HEAD_BYTES // 2))
            assert conn.recv(65536).startswith(b"HTTP/1.1 200")
