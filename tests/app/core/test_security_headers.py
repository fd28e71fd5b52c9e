"""Browser hardening headers, read deadlines, /metrics behind a scope, no secret in errors."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.core.settings import Settings
from app.security.headers import CSP
from app.security.transport import HEADER_TIMEOUT_ENV, DeadlineH11Protocol
from tests.app.keys.test_auth import new_key
from tests.app.keys.test_auth import secured as secured  # the fixture
from tests.app.live import live_server


def test_every_response_carries_the_hardening_headers(client: TestClient) -> None:
    for path in ("/", "/v1/models", "/healthz", "/v1/plan-jobs/nope", "/static/app.js"):
        headers = client.get(path).headers
        assert headers["content-security-policy"] == CSP, path
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"
        assert headers["referrer-policy"] == "same-origin"
        assert "strict-transport-security" not in headers


def test_csp_forbids_inline_script_and_framing() -> None:
    script_src = next(d for d in CSP.split("; ") if d.startswith("script-src"))
    assert script_src == "script-src 'self'"
    assert "frame-ancestors 'none'" in CSP


def test_no_page_has_an_inline_script_or_handler(client: TestClient) -> None:
    import re

    for path in ("/", "/scaling", "/catalog/models", "/calibration", "/login"):
        html = client.get(path).text
        assert not re.search(r"<script(?![^>]*\b(src|type=\"application/json\")=?)", html), path
        assert not re.search(r"\son[a-z]+\s*=", html), path


def test_docs_pages_allow_only_their_own_inline_scripts_by_hash(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.headers["content-security-policy"].count("'sha256-") == 1  # its bootstrap
    for path in ("/docs", "/redoc"):
        policy = client.get(path).headers["content-security-policy"]
        script_src = policy.split("script-src")[1].split(";")[0]
        assert "unsafe" not in script_src


def test_hsts_behind_tls_only(make_client: Callable[..., TestClient]) -> None:
    client = make_client()
    proxied = client.get("/healthz", headers={"X-Forwarded-Proto": "https"})
    assert proxied.headers["strict-transport-security"].startswith("max-age=")
    assert "strict-transport-security" not in client.get("/healthz").headers
    always = make_client(hsts=True)
    assert "strict-transport-security" in always.get("/healthz").headers


def test_metrics_need_a_read_key_when_auth_is_on(secured: TestClient) -> None:
    assert secured.get("/metrics").status_code == 401
    bearer = {"Authorization": f"Bearer {new_key(secured, 'read')}"}
    assert secured.get("/metrics", headers=bearer).status_code == 200


def test_metrics_can_be_declared_public(make_client: Callable[..., TestClient]) -> None:
    client = make_client(
        auth="api-key", secret_key="Zq3v9Lr2Wm8Kx1Tb7Nc4Hd6Pf0Gj5Ys-RuAeIoQ", metrics_public=True
    )
    assert client.get("/metrics").status_code == 200


def test_a_start_up_error_does_not_print_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "abcdefgh-changeme-0123456789-XYZsecretTAIL"
    monkeypatch.setenv("PLANNER_SECRET_KEY", secret)
    with pytest.raises(ValidationError) as info:
        Settings(env="production", auth="api-key")
    text = str(info.value)
    assert "placeholder" in text
    for tail in (secret[-8:], secret[-22:], "secretTAIL"):
        assert tail not in text


# --- read deadlines --------------------------------------------------------------------------
@pytest.fixture
def deadline_server(
    make_app: Callable[..., FastAPI], monkeypatch: pytest.MonkeyPatch, database_url: str
) -> Iterator[tuple[str, int]]:
    if not database_url.startswith("sqlite"):
        pytest.skip("transport, not the database")
    monkeypatch.setenv(HEADER_TIMEOUT_ENV, "0.5")
    with live_server(make_app(body_timeout_s=0.5), http=DeadlineH11Protocol) as address:
        yield address


def test_slow_headers_are_dropped(deadline_server: tuple[str, int]) -> None:
    with socket.create_connection(deadline_server, timeout=5) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        start = time.monotonic()
        assert conn.recv(1024) == b""  # the server closed the connection
        assert time.monotonic() - start < 3


def test_a_prompt_request_is_served_and_keeps_its_connection(
    deadline_server: tuple[str, int],
) -> None:
    host, port = deadline_server
    with httpx.Client(base_url=f"http://{host}:{port}") as client:
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
            time.sleep(0.2)


def test_a_stalled_body_is_408(deadline_server: tuple[str, int]) -> None:
    async def stalled() -> int:
        reader, writer = await asyncio.open_connection(*deadline_server)
        writer.write(
            b"POST /v1/evaluations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 5)
        writer.close()
        return int(line.split()[1])

    assert asyncio.run(stalled()) == 408


def test_templates_have_no_inline_script_or_handler() -> None:
    import re
    from pathlib import Path

    import app.web

    for template in (Path(app.web.__file__).parent / "templates").glob("*.html"):
        text = template.read_text()
        assert "<script>" not in text, template.name
        assert not re.search(r"\son[a-z]+\s*=|hx-on", text), template.name
