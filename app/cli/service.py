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
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.common import err_console

Opt = typer.Option
LIST_AXES = ("tp", "pp", "vpp", "cp", "ep", "etp", "micro_batch_size")


def register(cli: typer.Typer) -> None:
    cli.command("serve")(serve)
    cli.command("migrate")(migrate)
    cli.command("submit")(_build_submit())


def serve(
    host: Annotated[str, Opt(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, Opt(help="TCP port.")] = 8000,
    workers: Annotated[int, Opt(help="Uvicorn worker processes.")] = 1,
    log_level: Annotated[str, Opt(help="Uvicorn log level.")] = "info",
) -> None:
    """Run the HTTP API (migrates and seeds the database at start-up)."""
    import uvicorn

    from app.logging_config import mask_secrets
    from app.main import prepare_database
    from app.security.transport import HEADER_TIMEOUT_ENV, DeadlineH11Protocol
    from app.settings import Settings

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
        h11_max_incomplete_event_size=64 * 1024,  # request line + headers: at most 64 KiB
    )


def migrate() -> None:
    """Bring the database (PLANNER_DATABASE_URL) to the latest schema."""
    from app.db.migrate import upgrade
    from app.settings import Settings

    settings = Settings()
    upgrade(settings.database_url)
    typer.echo(f"database at {settings.database_url} is up to date")


def _as_lists(request: dict[str, Any]) -> dict[str, Any]:
    """CLI strings ('1,2,4', '64-1024') -> the API's lists."""
    from app.plan_request import _int_list

    out = dict(request)
    for name in LIST_AXES:
        if isinstance(out.get(name), str):
            values = _int_list(out, name, maximum=1 << 16) or []
            out[name] = values[0] if len(values) == 1 else values
    for name in ("num_gpus_options", "global_batch_size_options"):
        if isinstance(out.get(name), str):
            out[name] = _int_list(out, name, maximum=1 << 24)
    for name in ("recompute", "optimizer_sharding"):
        if isinstance(out.get(name), str):
            out[name] = [x.strip() for x in out[name].split(",") if x.strip()]
    return out


def _read_spec(path: Path) -> dict[str, Any]:
    from app.cli.common import fail

    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        fail(f"{path} does not hold a JSON/YAML object", field="model")
    return data


def _build_submit() -> Any:
    from app.cli import plan as plan_cli

    plan_params = inspect.signature(plan_cli.plan).parameters
    hints = typing.get_type_hints(plan_cli.plan, include_extras=True)
    own: dict[str, Any] = {
        "server": Annotated[str, Opt(help="Base URL of the planner service.")],
        "api_key": Annotated[str | None, Opt(help="Bearer token, if the server wants one.")],
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
        p.replace(annotation=hints[name], kind=inspect.Parameter.KEYWORD_ONLY)
        for name, p in plan_params.items()
    ]

    def submit(**options: Any) -> None:
        _submit(options, plan_cli)

    submit.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    submit.__annotations__ = {p.name: p.annotation for p in params}
    submit.__doc__ = "Send a plan request to a running server (same options as `planner plan`)."
    return submit


def _submit(options: dict[str, Any], plan_cli: Any) -> None:
    from app.cli.common import fail, print_json, request_from_options
    from app.sdk import PlannerAPIError, PlannerClient

    server = options.pop("server")
    api_key = options.pop("api_key")
    wait = options.pop("wait")
    wait_timeout = options.pop("wait_timeout")
    key = options.pop("idempotency_key")
    json_output = options.pop("json_output", False)
    gpus, gpus_range = plan_cli._split_gpus(options.pop("num_gpus"))
    batch, batch_range = plan_cli._split_gpus(options.pop("global_batch_size"))
    model = options.get("model")
    if model and Path(model).is_file():  # the server never reads paths: send the spec inline
        options["model"] = _read_spec(Path(model))
    request = _as_lists(
        request_from_options(
            num_gpus=gpus,
            num_gpus_options=gpus_range,
            global_batch_size=batch,
            global_batch_size_options=batch_range,
            **options,
        )
    )
    try:
        with PlannerClient(server, api_key=api_key) as client:
            job = client.submit_plan(request, idempotency_key=key)
            if not wait:
                print_json(job) if json_output else typer.echo(f"queued plan job {job['id']}")
                return
            job = client.wait_for_job(job["id"], timeout=wait_timeout)
            if job["status"] != "succeeded":
                fail(f"plan job {job['id']} {job['status']}: {job.get('error') or ''}".strip())
            result = client.get_plans(job["id"])
    except PlannerAPIError as exc:
        field = exc.errors[0]["field"] if exc.errors else None
        fail(str(exc.problem.get("detail", exc)), field=field)
    except TimeoutError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot reach {server}: {exc}")
    if json_output:
        print_json(result)
    else:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
