"""Structured logs: one JSON object a line, with the request id and job id, and no secrets.

:func:`configure_logging` installs one stderr handler on the root logger (idempotent).
:class:`SecretMaskingFilter` masks API keys (``pp_<prefix>_***``), passwords in database URLs
(``scheme://user:***@host``) and ``key=``/``password=``-style values in every record, so no
handler ever writes them; :func:`mask_secrets` is the same on a string.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "planner_request_id", default=None
)
JOB_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("planner_job_id", default=None)

_KEY = re.compile(r"\b(pp_[0-9a-f]{12}_)[A-Za-z0-9_-]+")
# bounded runs keep the search linear on hostile text (an unbounded scheme run backtracks
# quadratically over a long word); schemes, user names and passwords are far shorter
_URL_PASSWORD = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^:/@\s]{0,256}:)[^@\s]{1,256}@")
_NAMED_SECRET = re.compile(
    r"(?i)\b((?:api[_-]?key|x-api-key|password|passwd|secret[_-]?key|secret|token)"
    r"\s*[=:]\s*['\"]?)([^\s'\",;&]+)"
)
_HANDLER_MARK = "_planner_handler"
_STANDARD_ATTRS = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def mask_secrets(text: str) -> str:
    """``text`` with API keys, URL passwords and ``password=...``-style values masked."""
    text = _KEY.sub(r"\1***", text)
    text = _URL_PASSWORD.sub(r"\1***@", text)
    return _NAMED_SECRET.sub(r"\1***", text)


@contextmanager
def job_context(job_id: str) -> Iterator[None]:
    """Log lines inside the block carry ``job_id``."""
    token = JOB_ID.set(job_id)
    try:
        yield
    finally:
        JOB_ID.reset(token)


class SecretMaskingFilter(logging.Filter):
    """Rewrites each record's message (and exception text) with secrets masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_secrets(message)
        if masked != message or record.args:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        return True


class ContextFilter(logging.Filter):
    """Adds ``request_id`` and ``job_id`` from the context to each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get()
        if getattr(record, "job_id", None) is None:
            record.job_id = JOB_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_") and value is not None:
                out[key] = value if isinstance(value, int | float | bool) else str(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        return mask_secrets(json.dumps(out, default=str))


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return mask_secrets(super().format(record))


def make_handler(stream: Any = None, fmt: str = "json") -> logging.Handler:
    """A handler with the context and masking filters and the chosen formatter."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.addFilter(SecretMaskingFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    return handler


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    """Root logging to stderr as JSON lines (or text); replaces only our own earlier handler.
    Uvicorn's loggers pass through the same masking filter."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    handler = make_handler(fmt=fmt)
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        for h in logging.getLogger(name).handlers:
            if not any(isinstance(f, SecretMaskingFilter) for f in h.filters):
                h.addFilter(SecretMaskingFilter())
