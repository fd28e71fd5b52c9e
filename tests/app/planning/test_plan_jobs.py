"""Plan jobs: 202 + Location, idempotency, ?wait=, results, cancel, listing, failures."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import JOB_70B

PLAN = dict(JOB_70B)
SLOW = {**PLAN, "seed": 999}


def test_submit_returns_202_with_location(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs", json=PLAN)
    assert r.status_code == 202
    job = r.json()
    assert r.headers["location"] == f"/v1/plan-jobs/{job['id']}"
    assert job["status"] in ("queued", "running", "succeeded")


def test_job_runs_to_success_with_plans(client: TestClient, wait_for) -> None:
    job_id = client.post("/v1/plan-jobs", json=PLAN).json()["id"]
    job = wait_for(client, job_id, {"succeeded"})
    assert job["progress"] == 1.0 and job["attempts"] == 1
    plans = client.get(f"/v1/plan-jobs/{job_id}/plans").json()
    assert (plans["plans"][0]["layout"]["tp"], plans["plans"][0]["layout"]["pp"]) == (8, 4)
    assert plans["rejections"] == {"memory": 3}


def test_wait_returns_200_with_finished_job(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs?wait=10", json=PLAN)
    assert r.status_code == 200
    assert r.json()["status"] == "succeeded"


def test_wait_that_runs_out_returns_202(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs?wait=0.2", json=SLOW)
    assert r.status_code == 202
    assert r.json()["status"] in ("queued", "running")


def test_wait_is_bounded(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs?wait=601", json=PLAN)
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "wait"


def test_wait_nan_says_finite(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs?wait=nan", json=PLAN)
    assert r.status_code == 422
    assert "finite number" in r.json()["errors"][0]["message"]


def test_same_idempotency_key_and_body_is_the_same_job(client: TestClient) -> None:
    headers = {"Idempotency-Key": "k-1"}
    first = client.post("/v1/plan-jobs", json=PLAN, headers=headers).json()
    second = client.post("/v1/plan-jobs", json=PLAN, headers=headers).json()
    assert first["id"] == second["id"]
    assert client.get("/v1/plan-jobs").json()["total"] == 1


def test_same_idempotency_key_other_body_is_409(client: TestClient) -> None:
    headers = {"Idempotency-Key": "k-2"}
    client.post("/v1/plan-jobs", json=PLAN, headers=headers)
    r = client.post("/v1/plan-jobs", json={**PLAN, "num_gpus": 128}, headers=headers)
    assert r.status_code == 409
    assert "Idempotency-Key" in r.json()["detail"]


def test_plans_of_unfinished_job_are_409(client: TestClient) -> None:
    job_id = client.post("/v1/plan-jobs", json=SLOW).json()["id"]
    r = client.get(f"/v1/plan-jobs/{job_id}/plans")
    assert r.status_code == 409
    assert "succeeded" in r.json()["detail"]


def test_cancel_running_job(client: TestClient, wait_for) -> None:
    job_id = client.post("/v1/plan-jobs", json=SLOW).json()["id"]
    wait_for(client, job_id, {"running"})
    r = client.post(f"/v1/plan-jobs/{job_id}/cancel")
    assert r.status_code in (200, 202)
    job = wait_for(client, job_id, {"cancelled", "succeeded", "failed"})
    assert job["status"] == "cancelled"
    assert job["progress"] < 1.0


def test_cancel_queued_job_is_immediate(make_client) -> None:
    client = make_client(workers=0)
    job_id = client.post("/v1/plan-jobs", json=PLAN).json()["id"]
    r = client.post(f"/v1/plan-jobs/{job_id}/cancel")
    assert (r.status_code, r.json()["status"]) == (200, "cancelled")


def test_cancel_finished_job_is_409(client: TestClient) -> None:
    job_id = client.post("/v1/plan-jobs?wait=10", json=PLAN).json()["id"]
    assert client.post(f"/v1/plan-jobs/{job_id}/cancel").status_code == 409


def test_unknown_job_is_404(client: TestClient) -> None:
    for path in ("", "/plans"):
        r = client.get(f"/v1/plan-jobs/does-not-exist{path}")
        assert r.status_code == 404
    assert client.post("/v1/plan-jobs/does-not-exist/cancel").status_code == 404


def test_failed_job_records_the_error(client: TestClient, wait_for) -> None:
    job_id = client.post("/v1/plan-jobs", json={**PLAN, "seed": 13}).json()["id"]
    job = wait_for(client, job_id, {"failed"})
    assert "the search exploded" in job["error"]
    assert client.get(f"/v1/plan-jobs/{job_id}/plans").status_code == 409


def test_unknown_model_is_422_at_submission(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs", json={**PLAN, "model": "gpt-9"})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "model"


def test_out_of_bounds_number_is_422_naming_field(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs", json={**PLAN, "num_gpus": 10**6})
    assert r.status_code == 422
    err = r.json()["errors"][0]
    assert err["field"] == "num_gpus" and "65536" in err["message"]


def test_unknown_field_is_422_naming_it(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs", json={**PLAN, "tensor_parallel": 8})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "tensor_parallel"


def test_list_filters_by_status_and_paginates(make_client) -> None:
    client = make_client(workers=0)
    ids = [client.post("/v1/plan-jobs", json={**PLAN, "seed": i}).json()["id"] for i in range(3)]
    client.post(f"/v1/plan-jobs/{ids[0]}/cancel")
    page = client.get("/v1/plan-jobs?status=queued&limit=1&offset=1").json()
    assert (page["total"], page["limit"], page["offset"]) == (2, 1, 1)
    assert len(page["items"]) == 1 and page["items"][0]["id"] in ids[1:]


def test_user_model_is_inlined_and_stored_with_the_job(client: TestClient, planner_fake) -> None:
    spec = {
        "num_layers": 4,
        "hidden_size": 512,
        "ffn_hidden_size": 2048,
        "num_attention_heads": 8,
        "vocab_size": 32000,
    }
    client.post("/v1/models", json={"slug": "tiny", "spec": spec})
    job = client.post("/v1/plan-jobs?wait=10", json={**PLAN, "model": "tiny"}).json()
    assert job["resolved"]["model"]["hidden_size"] == 512
    assert planner_fake.plan_calls[-1]["model"]["name"] == "tiny"


def test_cluster_fills_gpu_and_gpus_per_node(client: TestClient, planner_fake) -> None:
    body = {k: v for k, v in PLAN.items() if k != "gpu"}
    r = client.post("/v1/plan-jobs?wait=10", json={**body, "cluster": "dgx-h100"})
    assert r.status_code == 200
    sent = planner_fake.plan_calls[-1]
    assert (sent["gpu"], sent["gpus_per_node"], "cluster" in sent) == ("h100-sxm-80gb", 8, False)


def test_unknown_cluster_is_422(client: TestClient) -> None:
    r = client.post("/v1/plan-jobs", json={**PLAN, "cluster": "nowhere"})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "cluster"
