"""A job belongs to the key that made it: another key's reads and cancels need admin, listings
show only your own jobs, and each web page asks for the scope its API twin asks for."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import JOB_70B, SLOW_SEED
from tests.app.keys.test_auth import _sign_in, new_key
from tests.app.keys.test_auth import secured as secured  # the fixture

PLAN = {**JOB_70B, "seed": SLOW_SEED}


def _submit(client: TestClient, key: str, **headers: str) -> str:
    response = client.post("/v1/plan-jobs", json=PLAN, headers={"X-API-Key": key, **headers})
    assert response.status_code in (200, 202), response.text
    return str(response.json()["id"])


def test_another_keys_job_is_403_to_read_plans_and_cancel(secured: TestClient) -> None:
    alice, bob = new_key(secured, "plan"), new_key(secured, "plan")
    job = _submit(secured, alice)
    as_bob = {"X-API-Key": bob}
    for response in (
        secured.get(f"/v1/plan-jobs/{job}", headers=as_bob),
        secured.get(f"/v1/plan-jobs/{job}/plans", headers=as_bob),
        secured.post(f"/v1/plan-jobs/{job}/cancel", headers=as_bob),
    ):
        assert response.status_code == 403, response.text
        assert "admin" in response.json()["detail"]
    assert secured.get(f"/v1/plan-jobs/{job}", headers={"X-API-Key": alice}).status_code == 200


def test_admin_reads_and_cancels_any_job(secured: TestClient) -> None:
    job = _submit(secured, new_key(secured, "plan"))
    admin = {"X-API-Key": new_key(secured, "admin")}
    assert secured.get(f"/v1/plan-jobs/{job}", headers=admin).status_code == 200
    assert secured.post(f"/v1/plan-jobs/{job}/cancel", headers=admin).status_code in (200, 202)


def test_listing_shows_only_your_own_jobs_unless_admin(secured: TestClient) -> None:
    alice, bob = new_key(secured, "plan"), new_key(secured, "read")
    mine = _submit(secured, alice)
    listed = secured.get("/v1/plan-jobs", headers={"X-API-Key": alice}).json()
    assert [j["id"] for j in listed["items"]] == [mine]
    theirs = secured.get("/v1/plan-jobs", headers={"X-API-Key": bob}).json()
    assert theirs["items"] == [] and theirs["total"] == 0
    admin = secured.get("/v1/plan-jobs", headers={"X-API-Key": new_key(secured, "admin")})
    assert [j["id"] for j in admin.json()["items"]] == [mine]


def test_idempotency_keys_are_per_api_key(secured: TestClient) -> None:
    alice, bob = new_key(secured, "plan"), new_key(secured, "plan")
    first = _submit(secured, alice, **{"Idempotency-Key": "nightly"})
    assert _submit(secured, alice, **{"Idempotency-Key": "nightly"}) == first
    assert _submit(secured, bob, **{"Idempotency-Key": "nightly"}) != first


def test_another_keys_batch_is_403(secured: TestClient) -> None:
    alice, bob = new_key(secured, "plan"), new_key(secured, "plan")
    batch = secured.post("/v1/batches", json={"jobs": [PLAN]}, headers={"X-API-Key": alice})
    assert batch.status_code == 202, batch.text
    batch_id = batch.json()["id"]
    assert secured.get(f"/v1/batches/{batch_id}", headers={"X-API-Key": bob}).status_code == 403
    results = secured.get(f"/v1/batches/{batch_id}/results", headers={"X-API-Key": bob})
    assert results.status_code == 403
    assert secured.get(f"/v1/batches/{batch_id}", headers={"X-API-Key": alice}).status_code == 200


def test_a_read_scope_session_cannot_run_a_scaling_search(secured: TestClient) -> None:
    _sign_in(secured, new_key(secured, "read"))
    assert secured.get("/scaling").status_code == 200  # the form itself is a read
    search = secured.get("/scaling?model=llama3.1-70b&run=1")
    assert search.status_code == 403
    assert "plan" in search.json()["detail"]


def test_a_plan_scope_session_passes_the_scaling_guard(secured: TestClient) -> None:
    _sign_in(secured, new_key(secured, "plan"))
    assert secured.get("/scaling?model=nope&run=1").status_code != 403


def test_web_plan_page_of_another_keys_job_is_not_shown(secured: TestClient) -> None:
    job = _submit(secured, new_key(secured, "plan"))
    _sign_in(secured, new_key(secured, "plan"))
    page = secured.get(f"/plans/{job}")
    assert page.status_code == 404
    assert "another API key" in page.text
