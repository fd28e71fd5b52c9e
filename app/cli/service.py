"""Service commands: ``planner serve``, ``planner migrate`` and ``planner submit``.

``submit`` takes the same options as ``planner plan`` (its signature is built from plan's, so the
two never drift apart) and sends the request to a running server through the SDK.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import typing
from typing import Annotated, Any

import typer

from app.cli.common import err_console, fail, log_levels

Opt = typer.Option


def register(cli: typer.Typer) -> None:
    cli.command("serve")(serve)
    cli.command("migrate")(migrate)
    cli.command("submit")(_build_submit())


def serve(
    host: Annotated[str, Opt(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, Opt(help="TCP port.", min=1, max=65535)] = 8000,
    workers: Annotated[int, Opt(help="Uvicorn worker processes.", min=1)] = 1,
    log_level: Annotated[
        str, Opt(help="Uvicorn log level.", callback=log_levels("trace"))
    ] = "info",
) -> None:
    """Run the HTTP API (migrates and seeds the database at start-up)."""
    import uvicorn

    from app.core.logging_config import mask_secrets
    from app.core.settings import Settings
    from app.main import prepare_database
    from app.security.transport import HEADER_TIMEOUT_ENV, MAX_HEAD_BYTES, DeadlineH11Protocol

    _check_port_free(host, port)  # before migrating: a clash was a JSON log line and exit 3
    settings = Settings()
    prepare_database(settings)  # once, before the worker processes start
    # the worker processes read the header deadline from the environment they inherit
    os.environ[HEADER_TIMEOUT_ENV] = str(settings.header_timeout_s)
    err_console.print(
        f"Parallel Planner on http://{host}:{port}/ (API docs: /docs); "
        f"database {mask_secrets(settings.database_url)}",
        highlight=False,
    )
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        log_config=None,  # the app's JSON logging (with secret masking) handles everything
        access_log=False,  # the request-id middleware writes one access line per request
        http=DeadlineH11Protocol,  # drops connections whose headers come too slowly
        timeout_keep_alive=5,  # idle keep-alive connections close after 5 s
        # a head still arriving; DeadlineH11Protocol caps one that comes whole at the same size
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
    )


def _check_port_free(host: str, port: int) -> None:
    """Fail naming --port when another process listens there (another server, say)."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        fail(f"cannot listen on {host!r}: {exc.strerror}; give an address like 127.0.0.1",
             field="--host")  # fmt: skip
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return  # uvicorn reports the rest (no permission, an address not ours)
            fail(f"port {port} on {host} is in use (another server?): pick a free one with "
                 f"--port N (PORT=N bash scripts/run)", field="--port")  # fmt: skip


def migrate() -> None:
    """Bring the database (PLANNER_DATABASE_URL) to the latest schema."""
    from app.core.migrate import upgrade
    from app.core.settings import Settings

    settings = Settings()
    upgrade(settings.database_url)
    typer.echo(f"database at {settings.database_url} is up to date")


def _build_submit() -> Any:
    from app.cli import plan as plan_cli

    plan_params = inspect.signature(plan_cli.plan).parameters
    hints = typing.get_type_hints(plan_cli.plan, include_extras=True)
    own: dict[str, Any] = {
        "server": Annotated[str, Opt(help="Base URL of the planner service.")],
        "api_key": Annotated[str | None, Opt(help="API key, sent as the X-API-Key header.")],
        "wait": Annotated[bool, Opt(help="Wait for the job to finish and print its plans.")],
        "wait_timeout": Annotated[float, Opt(help="Seconds to wait with --wait.")],
        "idempotency_key": Annotated[str | None, Opt(help="Resubmitting with it is safe.")],
    }
    defaults = {
        "server": "http://127.0.0.1:8000",
        "api_key": None,
        "wait": False,
        "wait_timeout": 3600.0,
        "idempotency_key": None,
    }
    params = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=defaults[name], annotation=annotation
        )
        for name, annotation in own.items()
    ]
    params += [
        p.replace(annotation=hints.get(name, p.annotation), kind=inspect.Parameter.KEYWORD_ONLY)
        for name, p in plan_params.items()
    ]

    def submit(**options: Any) -> None:
        _submit(options)

    submit.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    submit.__annotations__ = {p.name: p.annotation for p in params}
    submit.__doc__ = "Send a plan request to a running server (same options as `planner plan`)."
    return submit


def _submit(options: dict[str, Any]) -> None:
    from app.cli.common import EXIT_NOTHING_FEASIBLE, print_json
    from app.cli.errors import EXIT_INTERRUPTED
    from app.cli.requests import build_request
    from app.cli.result import fetch_command, print_queued
    from app.planning.schemas import PlanJobCreate
    from app.sdk import PlannerClient

    server = options.pop("server")
    api_key = options.pop("api_key")
    wait = options.pop("wait")
    wait_timeout = options.pop("wait_timeout")
    key = options.pop("idempotency_key")
    json_output = options.pop("json_output", False)
    if options.pop("profile", None) is not None:
        fail("--profile is for local plans; the server uses its clusters' calibrations")
    fields = {k: v for k, v in options.items() if k in PlanJobCreate.model_fields}
    typed, _ = build_request(PlanJobCreate, fields, server_cluster=False)  # checked here first
    request = typed.model_dump(mode="json", exclude_unset=True)
    with PlannerClient(server, api_key=api_key) as client:  # errors: app/cli/errors.py
        job = client.submit_plan(request, idempotency_key=key)
        if not wait:
            print_json(job) if json_output else print_queued(job, server, api_key)
            return
        try:
            job = client.wait_for_job(job["id"], timeout=wait_timeout)
        except KeyboardInterrupt:  # the job goes on at the server: say how to fetch it later
            command = fetch_command(job["id"], server, api_key)
            err_console.print(
                f"interrupted; plan job {job['id']} goes on at the server: {command} --wait",
                highlight=False,
                markup=False,
            )
            raise SystemExit(EXIT_INTERRUPTED) from None
        if job["status"] != "succeeded":  # the request was valid (checked above): 1, as `result`
            fail(f"plan job {job['id']} {job['status']}: {job.get('error') or ''}".strip(), code=1)
        result = client.get_plans(job["id"]).raw
    if json_output:
        print_json(result)
    else:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    if not result.get("plans"):  # as `planner plan` and `planner result` do
        raise SystemExit(EXIT_NOTHING_FEASIBLE)
