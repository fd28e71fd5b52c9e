"""Health, readiness and metrics."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_healthz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_when_database_answers(client: TestClient) -> None:
    assert client.get("/readyz").status_code == 200


def test_readyz_is_503_when_database_is_gone(client: TestClient) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker

    broken = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    app = client.app
    original = app.state.session_factory  # type: ignore[attr-defined]
    app.state.session_factory = sessionmaker(bind=broken)  # type: ignore[attr-defined]
    try:
        r = client.get("/readyz")
    finally:
        app.state.session_factory = original  # type: ignore[attr-defined]
    assert r.status_code == 503
    assert r.json()["status"] == 503


def test_metrics_count_requests_by_route_and_jobs_by_status(make_client) -> None:
    client = make_client(workers=0)
    client.get("/v1/models/nope")
    client.post(
        "/v1/plan-jobs",
        json={
            "model": "llama3.1-70b",
            "gpu": "h100-sxm-80gb",
            "num_gpus": 8,
            "seq_length": 4096,
            "global_batch_size": 16,
        },
    )
    text = client.get("/metrics").text
    assert (
        'planner_http_requests_total{method="GET",route="/v1/models/{slug}",status="404"} 1.0'
        in text
    )
    assert 'planner_plan_jobs{status="queued"} 1.0' in text
    assert "planner_http_request_duration_seconds_bucket" in text
