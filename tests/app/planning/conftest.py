"""Fixtures of the every-interface tests: a real app, and no server database for the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app


@pytest.fixture(scope="module")
def real_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    folder = tmp_path_factory.mktemp("interfaces")
    settings = Settings(data_dir=folder, database_url=f"sqlite:///{folder}/planner.db", workers=1)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture()
def no_server_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("PLANNER_DATABASE_URL", raising=False)
