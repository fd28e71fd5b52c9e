"""``planner batches``: the batches a planner service holds, newest first (``GET /v1/batches``).

``planner batch --server URL`` submits a batch and waits for it; this lists the batches the key
can see (its own; an admin key every one), to find one again: ``GET /v1/batches/{id}/results``
(or the SDK's ``get_batch_results``) fetches its rows.
"""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.common import out_console, print_json
from app.cli.result import DEFAULT_SERVER

Opt = typer.Option


def batches(
    server: Annotated[str, Opt(help="Base URL of the planner service.")] = DEFAULT_SERVER,
    api_key: Annotated[
        str | None, Opt(envvar="PLANNER_API_KEY", help="API key, sent as the X-API-Key header.")
    ] = None,
    limit: Annotated[int, Opt(min=1, max=500, help="Batches to show (1-500).")] = 20,
    offset: Annotated[int, Opt(min=0, help="Newest batches to skip.")] = 0,
    json_output: Annotated[bool, Opt("--json", help="Print the page as JSON.")] = False,
) -> None:
    """List the service's batches, newest first: status, jobs finished and failed, names."""
    from rich.table import Table

    from app.sdk import PlannerClient

    with PlannerClient(server, api_key=api_key) as client:  # errors: app/cli/errors.py
        page = client.list_batches(limit=limit, offset=offset)
    if json_output:
        print_json(page)
        return
    table = Table(title=f"{page['total']} batch(es) on {server}, newest first")
    for column in ("id", "status", "finished", "failed", "created (UTC)", "jobs"):
        table.add_column(column)
    for b in page["items"]:
        more = ", ..." if b["total"] > len(b["names"]) else ""
        table.add_row(
            b["id"],
            b["status"],
            f"{b['finished']}/{b['total']}",
            str(b["counts"].get("failed", 0)),
            str(b["created_at"])[:19].replace("T", " "),
            ", ".join(b["names"]) + more,
        )
    out_console().print(table)
    shown = page["offset"] + len(page["items"])
    if shown < page["total"]:
        typer.echo(f"{shown} of {page['total']} shown; --offset {shown} for the next ones")
