"""Foreseeable failures of any ``planner`` command as one line that says what to do.

A refused connection, a timeout, a bad API key, a problem answer from the service, a file that
cannot be read or a database that cannot be opened are the user's to fix, not bugs: they get one
line on stderr and a non-zero exit, never a traceback. :func:`explain` maps an exception to that
line (``None``: a bug, let the traceback through); :class:`CleanErrors` applies it around a
command. Heavy modules (httpx, SQLAlchemy) are looked up only if already imported, so that the
check costs nothing to commands that never loaded them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
# `planner --help` prints this; app/cli/common.py has the other two (bad input 2, nothing
# feasible 3), so every command exits with one of these
EXIT_CODES_HELP = (
    "Exit codes: 0 done; 1 failed (the service or database failed, every job of a batch "
    "failed, or the layout `evaluate` checked breaks a rule or does not fit); 2 bad input (the "
    "message names the flag or file to fix); 3 nothing feasible (plan, submit --wait, result, "
    "scale); 130 interrupted (Ctrl-C)."
)

HOW_TO_START = "start one with `planner serve` (or `bash scripts/run`), or pass --server URL"


@dataclass(frozen=True, slots=True, kw_only=True)
class Explained:
    """What to print for a foreseeable failure, and the exit code."""

    message: str
    exit_code: int = EXIT_FAILED


def _server_of(exc: Any) -> str:
    """The base URL a failed httpx request went to (``the server`` when unknown)."""
    try:
        url = exc.request.url
        return f"{url.scheme}://{url.netloc.decode()}"
    except (AttributeError, RuntimeError):
        return "the server"


def _http_transport(exc: BaseException) -> Explained | None:
    httpx = sys.modules.get("httpx")
    if httpx is None or not isinstance(exc, httpx.HTTPError):
        return None
    server = _server_of(exc)
    if isinstance(exc, httpx.ConnectError):
        return Explained(
            message=f"cannot reach the planner service at {server} ({exc}); {HOW_TO_START}",
            exit_code=EXIT_BAD_INPUT,  # the --server given is wrong or not up yet
        )
    if isinstance(exc, httpx.TimeoutException):
        return Explained(
            message=f"the planner service at {server} did not answer in time "
            f"({type(exc).__name__}); check it is up with `curl {server}/healthz`"
        )
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return Explained(
            message=f"bad --server URL ({exc}); give one like http://127.0.0.1:8000",
            exit_code=EXIT_BAD_INPUT,
        )
    return Explained(message=f"talking to the planner service at {server} failed: {exc}")


def _api_problem(exc: BaseException) -> Explained | None:
    sdk = sys.modules.get("app.sdk")
    if sdk is None or not isinstance(exc, sdk.PlannerAPIError):
        return None
    status, problem = exc.status, exc.problem
    detail = str(problem.get("detail") or problem.get("title") or "error")
    errors = problem.get("errors") or []
    where = f" (field: {errors[0]['field']})" if errors and errors[0].get("field") else ""
    if status == 401:
        hint = (
            "the service wants an API key: pass --api-key KEY (sent as the X-API-Key header); "
            "an admin creates one with `planner keys create --scopes plan`"
        )
        return Explained(message=f"HTTP 401: {detail}; {hint}")
    if status == 403:
        return Explained(
            message=f"HTTP 403: {detail}; use a key with the needed scope "
            "(`planner keys create --scopes plan` or `--scopes admin`)"
        )
    if status == 429:
        return Explained(message=f"HTTP 429: {detail}; wait a moment and retry")
    if status in (404, 405) and detail in ("Not Found", "Method Not Allowed"):  # no such route
        return Explained(
            message=f"HTTP {status}: {detail}; is --server the planner service's base URL, "
            "without /v1 (like http://127.0.0.1:8000)?",
            exit_code=EXIT_BAD_INPUT,
        )
    if status >= 500:
        request_id = problem.get("request_id")
        hint = f" (request id {request_id})" if request_id else ""
        return Explained(message=f"HTTP {status}: {detail}; the service failed, see its log{hint}")
    return Explained(message=f"HTTP {status}: {detail}{where}", exit_code=EXIT_BAD_INPUT)


def _settings(exc: BaseException) -> Explained | None:
    """A bad ``PLANNER_*`` environment variable (app.core.settings), named without its value
    (the settings hide their input: a secret must not reach the terminal or a log)."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(exc, pydantic.ValidationError):
        return None
    if exc.title != "Settings":
        return None
    problems = "; ".join(_setting_problem(e) for e in exc.errors())
    return Explained(
        message=f"bad setting: {problems}; fix the environment variable (or unset it for the "
        "default)",
        exit_code=EXIT_BAD_INPUT,
    )


def _setting_problem(error: Any) -> str:
    """One settings error: ``PLANNER_NAME: message``; a check across settings (no ``loc``) names
    its variables itself ("PLANNER_: Value error, PLANNER_SECRET_KEY ..." before)."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message
    return f"PLANNER_{'_'.join(str(p) for p in error['loc']).upper()}: {message}"


def _database(exc: BaseException) -> Explained | None:
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is None or not isinstance(exc, sa_exc.OperationalError | sa_exc.ArgumentError):
        return None
    from app.core.logging_config import mask_secrets

    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    return Explained(
        message=f"cannot open the database: {mask_secrets(first)}; "
        "check PLANNER_DATABASE_URL (default: SQLite in ./data)"
    )


def _file(exc: BaseException) -> Explained | None:
    if isinstance(
        exc, FileNotFoundError | IsADirectoryError | PermissionError | NotADirectoryError
    ):
        name = exc.filename or "the file"
        return Explained(
            message=f"cannot open {name}: {exc.strerror}; check the path",
            exit_code=EXIT_BAD_INPUT,
        )
    if isinstance(exc, UnicodeDecodeError):
        return Explained(
            message=f"a file is not UTF-8 text (byte {exc.start}); give a text file",
            exit_code=EXIT_BAD_INPUT,
        )
    return None


def explain(exc: BaseException) -> Explained | None:
    """The one line for a foreseeable failure, or ``None`` for a bug (shown as a traceback)."""
    if isinstance(exc, KeyboardInterrupt):
        return Explained(message="interrupted", exit_code=EXIT_INTERRUPTED)
    if isinstance(exc, TimeoutError):  # the SDK's wait_for_job/wait_for_batch
        return Explained(message=f"{exc}; wait longer (--wait-timeout / --timeout) or retry")
    for rule in (_http_transport, _api_problem, _settings, _database, _file):
        found = rule(exc)
        if found is not None:
            return found
    return None


class CleanErrors:
    """Mixin for a click command/group: foreseeable failures end with one line, no traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except Exception as exc:
            explained = explain(exc)
            if explained is None:
                raise
            report(explained)
        except KeyboardInterrupt as exc:
            report(explain(exc) or Explained(message="interrupted"))


def report(explained: Explained) -> None:
    from rich.markup import escape

    from app.cli.common import err_console

    err_console.print(f"[bold red]error:[/] {escape(explained.message)}", highlight=False)
    raise SystemExit(explained.exit_code)
