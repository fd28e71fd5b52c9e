"""docker/: the compose file's services and the Dockerfile's shape (Docker cannot run here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return data


def test_compose_has_postgres_api_workers_and_dashboard(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"postgres", "api", "worker", "optuna-dashboard"}
    assert compose["services"]["postgres"]["image"].startswith("postgres:15")


def test_api_replicas_run_no_in_process_workers(compose: dict[str, Any]) -> None:
    api = compose["services"]["api"]
    assert api["environment"]["PLANNER_WORKERS"] == "0"
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert api["environment"]["PLANNER_DATABASE_URL"].startswith("postgresql+psycopg://")


def test_workers_are_replicated_planner_worker_processes(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert worker["command"][:2] == ["planner", "worker"]
    assert worker["deploy"]["replicas"] >= 2
    assert (
        worker["environment"]["PLANNER_DATABASE_URL"]
        == (compose["services"]["api"]["environment"]["PLANNER_DATABASE_URL"])
    )


def test_optuna_lives_in_its_own_schema_that_the_dashboard_opens(compose: dict[str, Any]) -> None:
    url = compose["services"]["worker"]["environment"]["PLANNER_OPTUNA_STORAGE_URL"]
    assert "search_path%3Doptuna" in url
    dashboard = compose["services"]["optuna-dashboard"]
    assert "search_path%3Doptuna" in dashboard["command"][0]
    assert "8080:8080" in dashboard["ports"]


def test_settings_accept_the_compose_environment(compose: dict[str, Any]) -> None:
    from app.core.settings import Settings

    env = compose["services"]["api"]["environment"]
    settings = Settings(**{k.removeprefix("PLANNER_").lower(): v for k, v in env.items()})
    assert settings.workers == 0 and settings.fan_out_min_scenarios == 4
    assert not settings.is_sqlite


def test_dockerfile_is_multi_stage_non_root_with_a_healthcheck() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\w+)", text, flags=re.MULTILINE)
    assert len(stages) >= 2
    user = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*", text, flags=re.MULTILINE)
    assert "/healthz" in text
    assert "COPY --from=build" in text


def test_dockerfile_copies_what_the_service_needs_at_run_time() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    for path in ("app", "planner", "models_db", "alembic", "alembic.ini", "pyproject.toml"):
        assert re.search(rf"^COPY .*\b{re.escape(path)}\b", text, flags=re.MULTILINE), path
