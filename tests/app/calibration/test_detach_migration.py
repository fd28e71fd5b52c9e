"""Migration 0005 links each stored measurement and calibration to its cluster's catalog entry
and deletes nothing: a row older than the entry of its name was left by an earlier cluster of
that name (uploads need an existing cluster), so it stays detached, like a row whose name has
no entry; the downgrade drops only the link. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from alembic import command
from app.core.database import JSONType, UTCDateTime
from app.core.migrate import alembic_config, check, upgrade

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
ENTRY = sa.table(
    "catalog_entry",
    sa.column("id", sa.Integer),
    sa.column("kind", sa.String),
    sa.column("slug", sa.String),
    sa.column("builtin", sa.Boolean),
    sa.column("version", sa.Integer),
    sa.column("created_at", UTCDateTime()),
    sa.column("updated_at", UTCDateTime()),
)


def _rows_table(name: str, *extra: sa.ColumnClause[Any]) -> sa.TableClause:
    stamp = sa.column("created_at", UTCDateTime())
    return sa.table(name, sa.column("id", sa.Integer), sa.column("cluster_slug"), stamp, *extra)


MEASUREMENT = _rows_table("measurement", sa.column("source"), sa.column("data", JSONType))
CALIBRATION = _rows_table(
    "calibration",
    sa.column("num_measurements", sa.Integer),
    sa.column("profile", JSONType),
    sa.column("report", JSONType),
)


def _stored_before_0005(url: str) -> None:
    """``mine`` re-created at T0 + 1 h: one row of the old ``mine`` (T0), one of the new one
    (T0 + 2 h), one of ``gone`` (no entry), and a calibration of each ``mine``."""
    upgrade(url, "0004")
    engine = sa.create_engine(url)
    hour = timedelta(hours=1)
    with engine.begin() as conn:
        conn.execute(
            sa.insert(ENTRY),
            [
                {"id": 7, "kind": "cluster", "slug": "mine", "builtin": False, "version": 1,
                 "created_at": T0 + hour, "updated_at": T0 + hour},
                {"id": 8, "kind": "model", "slug": "gone", "builtin": False, "version": 1,
                 "created_at": T0, "updated_at": T0},
            ],
        )  # fmt: skip
        row = {"source": "csv", "data": {"tp": "4"}}
        conn.execute(
            sa.insert(MEASUREMENT),
            [
                {"id": 1, "cluster_slug": "mine", "created_at": T0, **row},
                {"id": 2, "cluster_slug": "mine", "created_at": T0 + 2 * hour, **row},
                {"id": 3, "cluster_slug": "gone", "created_at": T0 + 2 * hour, **row},
            ],
        )
        fit = {"num_measurements": 1, "profile": {}, "report": {}}
        conn.execute(
            sa.insert(CALIBRATION),
            [
                {"id": 1, "cluster_slug": "mine", "created_at": T0, **fit},
                {"id": 2, "cluster_slug": "mine", "created_at": T0 + 3 * hour, **fit},
            ],
        )
    engine.dispose()


def _links(url: str, table: str) -> dict[int, Any]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text(f"SELECT id, cluster_id FROM {table}"))
            return {row_id: cluster_id for row_id, cluster_id in found}
    finally:
        engine.dispose()


def test_rows_link_to_their_cluster_only_when_it_is_older_than_them(database_url: str) -> None:
    _stored_before_0005(database_url)
    upgrade(database_url)
    assert _links(database_url, "measurement") == {1: None, 2: 7, 3: None}
    assert _links(database_url, "calibration") == {1: None, 2: 7}
    check(database_url)  # the migrated schema is the models' schema


def test_the_migration_says_how_many_rows_it_detached(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    _stored_before_0005(database_url)
    with caplog.at_level("WARNING", logger="alembic.runtime.migration"):
        upgrade(database_url)
    assert "2 measurement row(s) belong to no existing cluster" in caplog.text
    assert "1 calibration row(s)" in caplog.text and "/v1/detached-measurements" in caplog.text


def test_down_and_up_again_keep_every_row(database_url: str) -> None:
    _stored_before_0005(database_url)
    upgrade(database_url)
    command.downgrade(alembic_config(database_url), "0004")
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("measurement")}
        tables = ("measurement", "calibration")
        counts = [conn.scalar(sa.text(f"SELECT count(*) FROM {t}")) for t in tables]
    engine.dispose()
    assert "cluster_id" not in columns and counts == [3, 2]
    upgrade(database_url)
    assert _links(database_url, "measurement") == {1: None, 2: 7, 3: None}
