"""Shared fixtures: a fresh database per test, on SQLite and (when configured) PostgreSQL.

PostgreSQL runs only when ``PLANNER_TEST_POSTGRES_URL`` is set, e.g.
``postgresql+psycopg://postgres:postgres@127.0.0.1:5432/planner_test``; the database is
emptied before each test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

POSTGRES_URL = os.environ.get("PLANNER_TEST_POSTGRES_URL", "")
DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _reset_postgres(url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    finally:
        engine.dispose()


@pytest.fixture(params=DATABASES)
def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A URL of an empty database: a new SQLite file, or the emptied test PostgreSQL."""
    if request.param == "postgres":
        if not POSTGRES_URL:
            pytest.skip("set PLANNER_TEST_POSTGRES_URL to run the PostgreSQL variant")
        _reset_postgres(POSTGRES_URL)
        yield POSTGRES_URL
        return
    folder = tmp_path_factory.mktemp("db")
    yield f"sqlite:///{folder}/planner.db"
