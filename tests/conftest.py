"""Shared fixtures: a fresh database per test, on SQLite and (when configured) PostgreSQL.

PostgreSQL runs only when ``PLANNER_TEST_POSTGRES_URL`` is set, e.g.
``postgresql+psycopg://postgres:postgres@127.0.0.1:5432/planner_test``; the database is
emptied before each test. Under pytest-xdist each worker gets its own database (the name plus
``_gw0``, ``_gw1``, ...; created on first use), so two workers never empty each other's tables.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _worker_url(url: str, worker: str) -> str:
    """The URL of this xdist worker's own database (the URL itself outside xdist)."""
    if not url or not worker:
        return url
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.set(database=f"{parsed.database}_{worker}").render_as_string(hide_password=False)


BASE_POSTGRES_URL = os.environ.get("PLANNER_TEST_POSTGRES_URL", "")
POSTGRES_URL = _worker_url(BASE_POSTGRES_URL, os.environ.get("PYTEST_XDIST_WORKER", ""))
_created: set[str] = set()


def _ensure_database(url: str) -> None:
    """Create this worker's database once, connecting through the configured one."""
    if url == BASE_POSTGRES_URL or url in _created:
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    admin = create_engine(BASE_POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            found = conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).first()
            if found is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    _created.add(url)


def _reset_postgres(url: str) -> None:
    from sqlalchemy import create_engine, text

    _ensure_database(url)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    finally:
        engine.dispose()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``) every test that talks to the shared PostgreSQL
    runs on one worker, so that a test there may disturb the server without failing another
    worker's test; test_faults, which stops PostgreSQL for 10 s, stops a throw-away server of its
    own (tests/faults/throwaway_postgres.py). Everything else spreads over the workers."""
    for item in items:
        if item.get_closest_marker("postgres") or item.get_closest_marker("postgres_server"):
            item.add_marker(pytest.mark.xdist_group("postgres"))


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
