"""Structured logs: JSON lines with the request id (X-Request-ID in and out); no API key and no
database password ever reaches a log line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from app.core.engine import unit_of_work
from app.core.logging_config import job_context, make_handler, mask_secrets
from app.keys.service import ApiKeyStore


@pytest.fixture
def log_lines() -> Iterator[Callable[[], list[dict[str, object]]]]:
    stream = io.StringIO()
    handler = make_handler(stream, "json")
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    def lines() -> list[dict[str, object]]:
        return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]

    yield lines
    root.removeHandler(handler)
    root.setLevel(old_level)


def _access(lines: list[dict[str, object]], path: str) -> dict[str, object]:
    found = [x for x in lines if x.get("logger") == "app.access" and x.get("path") == path]
    assert found, f"no access log line for {path}"
    return found[-1]


def test_request_id_is_echoed_and_logged(client: TestClient, log_lines) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/v1/models", headers={"X-Request-ID": "req-42.abc"})
    assert response.headers["x-request-id"] == "req-42.abc"
    line = _access(log_lines(), "/v1/models")
    assert line["request_id"] == "req-42.abc"
    assert line["status"] == 200
    assert line["method"] == "GET"
    assert isinstance(line["duration_ms"], float)


def test_missing_or_unsafe_request_id_is_replaced(client: TestClient) -> None:
    generated = client.get("/healthz").headers["x-request-id"]
    assert len(generated) == 32
    unsafe = client.get("/healthz", headers={"X-Request-ID": "bad id\r\nx" * 3})
    assert unsafe.headers["x-request-id"] != "bad id\r\nx" * 3
    assert len(unsafe.headers["x-request-id"]) == 32


def test_job_id_is_in_lines_logged_inside_a_job(log_lines) -> None:  # type: ignore[no-untyped-def]
    with job_context("job-7"):
        logging.getLogger("app.planning.worker").warning("step")
    assert log_lines()[-1]["job_id"] == "job-7"


def test_api_keys_never_reach_the_logs(make_client, log_lines) -> None:  # type: ignore[no-untyped-def]
    client = make_client(auth="api-key", secret_key="Zq3v9Lr2Wm8Kx1Tb7Nc4Hd6Pf0Gj5Ys-RuAeIoQ")
    with unit_of_work(client.app.state.session_factory) as session:
        key, _ = ApiKeyStore(session).create(["admin"])
    secret_part = key.split("_", 2)[2]
    client.get("/v1/models", headers={"X-API-Key": key})
    client.get(f"/v1/models/{key}", headers={"X-API-Key": key})  # the key in a path
    client.get("/v1/models", headers={"X-API-Key": key[:-1] + "Z"})  # a wrong key
    created = client.post("/v1/keys", json={"scopes": ["read"]}, headers={"X-API-Key": key})
    logging.getLogger("app").error("a handler that logs the key %s by mistake", key)
    try:
        raise RuntimeError(f"failure with {created.json()['key']}")
    except RuntimeError:
        logging.getLogger("app").exception("boom")
    text = json.dumps(log_lines())
    assert secret_part not in text
    assert created.json()["key"].split("_", 2)[2] not in text
    assert f"pp_{key.split('_')[1]}_***" in text  # masked, the public prefix kept


def test_database_passwords_are_masked(log_lines) -> None:  # type: ignore[no-untyped-def]
    url = "postgresql+psycopg://planner:S3cretPassw0rd@db.internal:5432/planner"
    logging.getLogger("app.db").warning("cannot connect to %s", url)
    logging.getLogger("app.db").warning("settings password=hunter2 api_key=abc123")
    text = json.dumps(log_lines())
    assert "S3cretPassw0rd" not in text
    assert "hunter2" not in text
    assert "abc123" not in text
    assert "postgresql+psycopg://planner:***@db.internal:5432/planner" in text


def test_mask_secrets_keeps_ordinary_text() -> None:
    text = "GET /v1/models 200 in 3.2 ms (tp=8, pp=4)"
    assert mask_secrets(text) == text
