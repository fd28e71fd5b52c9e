"""Alembic: migrations build the schema the rows describe (``alembic check`` is clean)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect

from app.core.migrate import check, upgrade


def test_upgrade_creates_every_table(database_url: str) -> None:
    upgrade(database_url)
    engine = create_engine(database_url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"catalog_entry", "catalog_version", "plan_job", "measurement", "calibration"} <= tables


def test_alembic_check_is_clean_after_upgrade(database_url: str) -> None:
    upgrade(database_url)
    check(database_url)  # raises if the models and the migrations disagree


def test_alembic_check_fails_on_an_empty_database(database_url: str) -> None:
    from alembic.util.exc import CommandError

    with pytest.raises(CommandError, match="not up to date"):
        check(database_url)
