"""Structured logs: one JSON object a line, with the request id and job id, and no secrets.

structlog renders the records of the standard library's loggers (the app's, uvicorn's,
SQLAlchemy's), so every module keeps ``logging.getLogger(__name__)``; the fields are ``ts``,
``level``, ``logger``, ``message``, the record's extras, ``request_id``/``job_id`` from the
context, and ``exception``. :func:`configure_logging` installs one stderr handler on the root
logger (idempotent). :class:`SecretMaskingFilter` masks API keys (``pp_<prefix>_***``),
passwords in database URLs (``scheme://user:***@host``) and ``key=``/``password=``-style values
in every record, and the last processor masks every field again, so no handler ever writes
them; :func:`mask_secrets` is the same on a string.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog
from structlog.typing import EventDict, Processor

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
_DROPPED = frozenset({"color_message"})  # uvicorn's ANSI copy of the message
_FIRST = ("ts", "level", "logger", "message")


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


def _add_context_ids(_logger: Any, _method: str, event: EventDict) -> EventDict:
    """``request_id`` and ``job_id`` from the context, unless the record carries its own."""
    for key, var in (("request_id", REQUEST_ID), ("job_id", JOB_ID)):
        if event.get(key) is None:
            event[key] = var.get()
    return event


def _mask_values(_logger: Any, _method: str, event: EventDict) -> EventDict:
    """Every string value masked, so an extra field or a traceback cannot carry a secret."""
    for key, value in list(event.items()):
        if value is None or key in _DROPPED:
            del event[key]
        elif isinstance(value, str):
            event[key] = mask_secrets(value)
        elif not isinstance(value, int | float | bool):
            event[key] = mask_secrets(str(value))
    first = {k: event.pop(k) for k in _FIRST if k in event}  # ts, level, logger, message lead
    return {**first, **event}


def _formatter(fmt: str) -> structlog.stdlib.ProcessorFormatter:
    """structlog renders the standard library's records (every logger of app, uvicorn, ...)."""
    chain: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
        structlog.stdlib.ExtraAdder(),  # extra={...} fields: method, path, status, duration_ms
        _add_context_ids,
        structlog.processors.format_exc_info,
        structlog.processors.EventRenamer("message"),
        _mask_values,
    ]
    renderer: Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(default=str)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False, event_key="message")
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=chain,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )


def make_handler(stream: Any = None, fmt: str = "json") -> logging.Handler:
    """A handler with the masking filter and structlog's JSON (or text) rendering."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(SecretMaskingFilter())
    handler.setFormatter(_formatter(fmt))
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
