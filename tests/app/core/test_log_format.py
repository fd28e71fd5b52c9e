"""The shape of a log line (structlog renders the standard library's records)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from app.core.logging_config import REQUEST_ID, job_context, make_handler


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, io.StringIO, io.StringIO]]:
    json_out, text_out = io.StringIO(), io.StringIO()
    handlers = [make_handler(json_out, "json"), make_handler(text_out, "text")]
    log = logging.getLogger("tests.log_format")
    log.propagate = False
    log.setLevel(logging.INFO)
    for handler in handlers:
        log.addHandler(handler)
    yield log, json_out, text_out
    for handler in handlers:
        log.removeHandler(handler)


def test_a_json_line_leads_with_ts_level_logger_message_and_keeps_extra_types(logger) -> None:  # type: ignore[no-untyped-def]
    log, out, _ = logger
    token = REQUEST_ID.set("req-1")
    try:
        with job_context("job-1"):
            log.info("done %s", "x", extra={"status": 200, "duration_ms": 1.5, "ok": True})
    finally:
        REQUEST_ID.reset(token)
    line = json.loads(out.getvalue())
    assert list(line)[:4] == ["ts", "level", "logger", "message"]
    assert line["ts"].endswith("Z") and line["level"] == "info"
    assert line["message"] == "done x" and line["logger"] == "tests.log_format"
    assert (line["status"], line["duration_ms"], line["ok"]) == (200, 1.5, True)
    assert (line["request_id"], line["job_id"]) == ("req-1", "job-1")


def test_no_context_means_no_empty_id_fields(logger) -> None:  # type: ignore[no-untyped-def]
    log, out, _ = logger
    log.warning("plain")
    line = json.loads(out.getvalue())
    assert "request_id" not in line and "job_id" not in line


def test_secrets_in_extras_exceptions_and_text_lines_are_masked(logger) -> None:  # type: ignore[no-untyped-def]
    log, out, text = logger
    key = "pp_0123456789ab_SuperSecretPart"
    try:
        raise RuntimeError(f"failed with {key}")
    except RuntimeError:
        log.exception("boom", extra={"url": "postgresql://u:hunter2@db/x", "header": key})
    line = json.loads(out.getvalue())
    assert "SuperSecretPart" not in out.getvalue() and "hunter2" not in out.getvalue()
    assert "RuntimeError" in line["exception"] and "pp_0123456789ab_***" in line["exception"]
    assert line["url"] == "postgresql://u:***@db/x"
    assert "SuperSecretPart" not in text.getvalue() and "boom" in text.getvalue()


def test_a_worker_logs_with_the_id_of_the_job_it_runs(client) -> None:  # type: ignore[no-untyped-def]
    from tests.app.conftest import FAILING_SEED, JOB_70B, wait_for_status

    stream = io.StringIO()
    handler = make_handler(stream, "json")
    worker_log = logging.getLogger("app.planning.worker")
    worker_log.addHandler(handler)
    try:
        job_id = client.post("/v1/plan-jobs", json={**JOB_70B, "seed": FAILING_SEED}).json()["id"]
        wait_for_status(client, job_id, {"failed"})
    finally:
        worker_log.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    failed = [x for x in lines if "failed" in str(x["message"])]
    assert failed and failed[0]["job_id"] == job_id
