"""``planner keys create|list|revoke``: API keys, straight in the database of the current
settings (``PLANNER_DATABASE_URL``); the key is printed once, at creation, and never again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

keys_app = typer.Typer(help="Create, list and revoke API keys (works on the database directly).")


def register(cli: typer.Typer) -> None:
    cli.add_typer(keys_app, name="keys")


def _factory() -> sessionmaker[Session]:
    from app.core.engine import make_engine, make_session_factory
    from app.core.migrate import upgrade
    from app.core.settings import Settings

    settings = Settings()
    upgrade(settings.database_url)  # the api_key table must exist
    return make_session_factory(make_engine(settings.database_url))


@keys_app.command("create")
def create(
    scopes: Annotated[
        str, typer.Option(help="Comma-separated: read, plan, admin (each includes the previous).")
    ] = "plan",
    name: Annotated[str, typer.Option(help="A label shown in listings.")] = "",
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Create a key and print it (the only time it is shown)."""
    from app.cli.common import fail, print_json
    from app.core.engine import unit_of_work
    from app.core.errors import AppError
    from app.keys.service import ApiKeyStore

    try:
        with unit_of_work(_factory()) as session:
            key, info = ApiKeyStore(session).create(scopes.split(","), name)
    except AppError as exc:
        fail(exc.message, field="scopes")
    if json_output:
        print_json({"key": key, **info.to_dict()})
    else:
        typer.echo(key)
        typer.echo(
            f"id {info.id}, prefix {info.prefix}, scopes {' '.join(info.scopes)}; "
            "store the key now: it is not shown again",
            err=True,
        )


@keys_app.command("list")
def list_keys(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The keys: id, prefix, scopes, created, revoked (never the keys themselves)."""
    from app.cli.common import print_json
    from app.keys.service import ApiKeyStore

    with _factory()() as session:
        infos = ApiKeyStore(session).list()
    if json_output:
        print_json({"items": [i.to_dict() for i in infos]})
        return
    if not infos:  # an empty listing looked like a failure, or the wrong database
        typer.echo(
            "no API keys in this database (PLANNER_DATABASE_URL); create one with "
            "`planner keys create --scopes plan`",
            err=True,
        )
    for info in infos:
        state = f"revoked {info.revoked_at}" if info.revoked_at else "active"
        typer.echo(
            f"{info.id}  pp_{info.prefix}_...  {','.join(info.scopes):<16} {info.name!r:<20} "
            f"created {info.created_at}  {state}"
        )


@keys_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (or its public prefix).")],
) -> None:
    """Revoke a key: it stops working within seconds."""
    from app.cli.common import fail
    from app.core.engine import unit_of_work
    from app.core.errors import AppError
    from app.keys.service import ApiKeyStore

    try:
        with unit_of_work(_factory()) as session:
            info = ApiKeyStore(session).revoke(key_id)
    except AppError as exc:
        fail(exc.message, field="id")
    typer.echo(f"revoked {info.id} (pp_{info.prefix}_...)")
