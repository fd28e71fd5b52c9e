"""Browser hardening headers on every response.

* ``Content-Security-Policy``: scripts only from this origin (no inline script: the pages'
  scripts are static files), no plugins, no framing (``frame-ancestors 'none'``), forms post
  only here. Inline *styles* stay allowed: the vendored chart and htmx set element styles, and
  a style cannot run code. A route may send its own policy (``/docs`` allows the hashes of its
  two inline bootstrap scripts) and this middleware leaves it alone.
* ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` (older browsers),
  ``Referrer-Policy: same-origin`` (job ids in URLs do not leak to other sites).
* ``Strict-Transport-Security`` when the request came over TLS: the ASGI scheme is ``https``
  (uvicorn with a certificate), a proxy says ``X-Forwarded-Proto: https``, or
  ``PLANNER_HSTS=true`` says TLS always ends in front of the service.
"""

from __future__ import annotations

import base64
import hashlib
import re

from app.core.middleware import ASGIApp, Message, Receive, Scope, Send, _header

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
HSTS = "max-age=31536000; includeSubDomains"
BASE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
)
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)  # our own pages only


def csp_allowing_inline_scripts_of(html: str) -> str:
    """The policy plus the SHA-256 of each inline ``<script>`` of ``html`` (a page we render
    ourselves, such as FastAPI's Swagger UI bootstrap), so that no ``'unsafe-inline'`` is needed.
    """
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html)
    ]
    return CSP.replace("script-src 'self'", " ".join(["script-src 'self'", *hashes]))


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp, *, hsts: bool = False) -> None:
        self.app = app
        self.hsts = hsts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # a spoofed X-Forwarded-Proto only changes the sender's own response, and browsers
        # ignore HSTS received over plain http, so the header is safe to honour as it is
        tls = (
            self.hsts
            or scope.get("scheme") == "https"
            or _header(scope, b"x-forwarded-proto") == "https"
        )

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {bytes(k).lower() for k, _ in headers}
                headers += [h for h in BASE_HEADERS if h[0] not in names]
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", CSP.encode()))
                if tls:
                    headers.append((b"strict-transport-security", HSTS.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
