"""POST /v1/evaluations: validation at the edge, references resolved, the planner's JSON."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import LAYOUT_70B, FakePlanner

BODY = dict(LAYOUT_70B)


def test_evaluation_returns_the_planner_result(client: TestClient) -> None:
    r = client.post("/v1/evaluations", json=BODY)
    assert r.status_code == 200
    assert {k: r.json()["layout"][k] for k in ("tp", "pp", "cp")} == {"tp": 8, "pp": 4, "cp": 1}
    assert r.json()["valid"] is True


def test_spec_error_becomes_422_with_its_field(client: TestClient) -> None:
    r = client.post("/v1/evaluations", json={**BODY, "model": "gpt-9"})
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["errors"] == [{"field": "model", "message": "unknown model 'gpt-9'"}]


def test_missing_field_is_422_saying_it_is_required(client: TestClient) -> None:
    body = {k: v for k, v in BODY.items() if k != "seq_length"}
    r = client.post("/v1/evaluations", json=body)
    assert r.status_code == 422
    assert r.json()["errors"][0] == {"field": "seq_length", "message": "seq_length is required"}


def test_bad_choice_is_422(client: TestClient) -> None:
    r = client.post("/v1/evaluations", json={**BODY, "recompute": "sometimes"})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "recompute"


def test_malformed_json_is_422_not_500(client: TestClient) -> None:
    r = client.post(
        "/v1/evaluations", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422


def test_cluster_newest_calibration_becomes_the_profile(
    client: TestClient, planner_fake: FakePlanner
) -> None:
    from app.calibration.models import CalibrationRow
    from app.calibration.repository import CalibrationRepository

    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    with factory() as session, session.begin():
        repo = CalibrationRepository(session)
        for value in (1, 2):  # a stored profile names its GPU (PerformanceProfile.to_dict)
            fitted = {"gpu": "h100-sxm-80gb", "v": value}
            repo.add(
                CalibrationRow(
                    cluster_slug="dgx-h100", num_measurements=1, profile=fitted, report={}
                )
            )
    body = {k: v for k, v in BODY.items() if k != "gpu"}
    r = client.post("/v1/evaluations", json={**body, "cluster": "dgx-h100"})
    assert r.status_code == 200
    sent, profile = planner_fake.evaluate_calls[-1]
    expected = ("h100-sxm-80gb", 8, {"gpu": "h100-sxm-80gb", "v": 2})
    assert (sent["gpu"], sent["gpus_per_node"], profile) == expected
    assert r.json()["gpu"] == "h100-sxm-80gb"
