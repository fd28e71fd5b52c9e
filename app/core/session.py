"""Signed session cookies of the web UI, and their CSRF tokens (HMAC-SHA256, stdlib only).

The cookie holds the signed-in key's id and scopes, the id of its server-side session row
(app/keys/repository.py: sign-out and key revocation end it), a per-session CSRF token and an
expiry; it never holds the key. Every form POST must carry the session's CSRF token in a hidden
field.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

SESSION_COOKIE = "planner_session"
CSRF_FIELD = "csrf_token"
MIN_SECRET_CHARS = 32
_PLACEHOLDERS = ("change", "secret", "placeholder", "example", "default", "xxxx", "todo")


def check_secret_key(secret: str) -> None:
    """Refuse a secret that is short or obviously a placeholder (production start-up)."""
    lowered = secret.lower()
    if len(secret) < MIN_SECRET_CHARS:
        raise ValueError(
            f"PLANNER_SECRET_KEY must be at least {MIN_SECRET_CHARS} characters in production "
            "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`)"
        )
    if any(word in lowered for word in _PLACEHOLDERS) or len(set(secret)) < 8:
        raise ValueError("PLANNER_SECRET_KEY looks like a placeholder; generate a random one")


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSession:
    key_id: str
    prefix: str
    scopes: tuple[str, ...]
    csrf: str
    expires_at: float
    session_id: str
    """The ``web_session`` row that must still be live for the cookie to count."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionSigner:
    """Signs and reads session cookies with one secret."""

    def __init__(self, secret: str, max_age_s: float = 12 * 3600) -> None:
        self._key = hashlib.sha256(b"planner-session\0" + secret.encode()).digest()
        self.max_age_s = max_age_s

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())

    def issue(
        self, key_id: str, prefix: str, scopes: tuple[str, ...], session_id: str
    ) -> tuple[str, WebSession]:
        session = WebSession(
            session_id=session_id,
            key_id=key_id,
            prefix=prefix,
            scopes=scopes,
            csrf=secrets.token_urlsafe(24),
            expires_at=time.time() + self.max_age_s,
        )
        body: dict[str, Any] = {
            "k": session.key_id,
            "p": session.prefix,
            "s": list(session.scopes),
            "c": session.csrf,
            "e": int(session.expires_at),
            "i": session.session_id,
        }
        payload = _b64(json.dumps(body, separators=(",", ":")).encode())
        return f"{payload}.{self._sign(payload)}", session

    def read(self, cookie: str | None) -> WebSession | None:
        """The session in a cookie if its signature is good and it has not expired."""
        if not cookie or cookie.count(".") != 1 or len(cookie) > 4096:
            return None
        payload, signature = cookie.split(".")
        if not hmac.compare_digest(signature, self._sign(payload)):
            return None
        try:
            body = json.loads(_unb64(payload))
            session = WebSession(
                key_id=str(body["k"]),
                prefix=str(body["p"]),
                scopes=tuple(str(s) for s in body["s"]),
                csrf=str(body["c"]),
                expires_at=float(body["e"]),
                session_id=str(body["i"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires_at > time.time() else None


def csrf_ok(session: WebSession | None, token: str | None) -> bool:
    return bool(session and token and hmac.compare_digest(session.csrf, token))
