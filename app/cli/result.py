"""``planner result JOB_ID``: the plans of a job queued with ``planner submit`` (no ``--wait``).

``submit`` prints this command, with the server and the key option filled in, so the way from
"queued" to the plans is one copy and paste.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any

import typer

from app.cli.common import EXIT_NOTHING_FEASIBLE, err_console, fail, print_json

Opt = typer.Option
DEFAULT_SERVER = "http://127.0.0.1:8000"


def register(cli: typer.Typer) -> None:
    cli.command("result")(result)


def fetch_command(job_id: str, server: str, api_key: str | None) -> str:
    """The exact ``planner result`` command line for a queued job."""
    parts = ["planner", "result", job_id]
    if server.rstrip("/") != DEFAULT_SERVER:
        parts += ["--server", server]
    if api_key:  # never echo the key itself: it would land in shell history and logs
        parts += ["--api-key", "$PLANNER_API_KEY"]
    return " ".join(p if p.startswith("$") else shlex.quote(p) for p in parts)


def print_queued(job: dict[str, Any], server: str, api_key: str | None) -> None:
    """``queued plan job ID`` on stdout; how to fetch its plans on stderr."""
    typer.echo(f"queued plan job {job['id']}")
    command = fetch_command(job["id"], server, api_key)
    err_console.print(f"fetch its plans with: {command} --wait", highlight=False, markup=False)


def result(
    job_id: Annotated[str, typer.Argument(help="The id that `planner submit` printed.")],
    server: Annotated[str, Opt(help="Base URL of the planner service.")] = DEFAULT_SERVER,
    api_key: Annotated[
        str | None,
        Opt(
            envvar="PLANNER_API_KEY",
            help="API key, sent as the X-API-Key header.",
        ),
    ] = None,
    wait: Annotated[bool, Opt(help="Wait until the job has finished.")] = False,
    wait_timeout: Annotated[float, Opt(help="Seconds to wait with --wait.")] = 3600.0,
    json_output: Annotated[bool, Opt("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Show a plan job's status, or its plans once it has succeeded."""
    from app.cli.plan import _print_result
    from app.sdk import PlannerClient

    with PlannerClient(server, api_key=api_key) as client:  # errors: app/cli/errors.py
        job = client.wait_for_job(job_id, timeout=wait_timeout) if wait else client.get_job(job_id)
        if job["status"] in ("queued", "running"):
            progress = job.get("progress")
            done = f" ({100 * progress:.0f} %)" if isinstance(progress, int | float) else ""
            fail(
                f"plan job {job_id} is {job['status']}{done}; run this again later, or add --wait",
                code=1,
            )
        if job["status"] != "succeeded":
            fail(f"plan job {job_id} {job['status']}: {job.get('error') or ''}".strip(), code=1)
        plans = client.get_plans(job_id)
    if json_output:
        print_json(plans.raw)
    else:
        _print_result(plans)
    if not plans.plans:
        raise SystemExit(EXIT_NOTHING_FEASIBLE)
