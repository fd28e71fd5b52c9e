"""A ``--server`` URL that reaches a web server but no planner route (``.../v1`` added, a
typo in the path) says to check the base URL; it was a bare "HTTP 404: Not Found" (QA round 9).
A 404 of the service itself (an unknown job) keeps its own message."""

from __future__ import annotations

from app.cli.errors import explain
from app.sdk import PlannerAPIError


def test_an_unknown_route_points_at_the_server_url() -> None:
    said = explain(PlannerAPIError(404, {"detail": "Not Found"}))
    assert said is not None
    assert "HTTP 404: Not Found" in said.message and "without /v1" in said.message
    assert said.exit_code == 2


def test_an_unknown_job_keeps_the_services_words() -> None:
    said = explain(
        PlannerAPIError(404, {"detail": "no plan job 'x'; GET /v1/plan-jobs lists them"})
    )
    assert said is not None
    assert said.message == "HTTP 404: no plan job 'x'; GET /v1/plan-jobs lists them"
