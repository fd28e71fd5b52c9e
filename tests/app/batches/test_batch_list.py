"""``GET /v1/batches``: the batches newest first, paged as ``GET /v1/plan-jobs`` is (limit 1-500,
offset), each with its status, job counts and created time; a key lists only its own batches,
an admin key every one; the SDK's ``list_batches`` and ``planner batches``."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from tests.app.batches.test_batches import GOOD, batch_client, live_server, wait_finished
from tests.app.conftest import SLOW_SEED
from tests.app.keys.test_auth import new_key
from tests.app.keys.test_auth import secured as secured  # the fixture

__all__ = ["batch_client", "live_server", "secured"]  # fixtures


def _submit(client: TestClient, *names: str, **headers: str) -> str:
    jobs = [{"name": name, **GOOD} for name in names]
    response = client.post("/v1/batches", json={"jobs": jobs}, headers=headers)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def test_batches_are_listed_newest_first_with_status_and_counts(batch_client: TestClient) -> None:
    first = _submit(batch_client, "a", "b")
    second = _submit(batch_client, "c")
    wait_finished(batch_client, first)
    wait_finished(batch_client, second)
    page = batch_client.get("/v1/batches").json()
    assert (page["total"], page["limit"], page["offset"]) == (2, 50, 0)
    assert [b["id"] for b in page["items"]] == [second, first]
    older = page["items"][1]
    assert older["status"] == "finished" and older["total"] == 2 and older["finished"] == 2
    assert older["counts"] == {
        "queued": 0, "running": 0, "succeeded": 2, "failed": 0, "cancelled": 0
    }  # fmt: skip
    assert older["names"] == ["a", "b"] and older["links"]["self"] == f"/v1/batches/{first}"
    assert older["created_at"] <= page["items"][0]["created_at"]


def test_limit_and_offset_page_the_list(batch_client: TestClient) -> None:
    ids = [_submit(batch_client, f"job{i}") for i in range(3)]
    newest_first = ids[::-1]
    one = batch_client.get("/v1/batches?limit=1&offset=1").json()
    assert [b["id"] for b in one["items"]] == newest_first[1:2] and one["total"] == 3
    past = batch_client.get("/v1/batches?offset=3").json()
    assert past["items"] == [] and past["total"] == 3


def test_limits_out_of_range_are_the_plan_job_lists_422(batch_client: TestClient) -> None:
    for query in ("limit=0", "limit=501", "offset=-1", "limit=ten"):
        batches = batch_client.get(f"/v1/batches?{query}")
        jobs = batch_client.get(f"/v1/plan-jobs?{query}")
        assert batches.status_code == jobs.status_code == 422, query
        field = query.split("=")[0]
        assert batches.json()["errors"] == jobs.json()["errors"], query
        assert field in batches.json()["detail"], batches.json()


def test_a_key_lists_only_its_own_batches_unless_admin(secured: TestClient) -> None:
    alice, bob = new_key(secured, "plan"), new_key(secured, "plan")
    slow = {**GOOD, "seed": SLOW_SEED}
    made = secured.post("/v1/batches", json={"jobs": [slow]}, headers={"X-API-Key": alice})
    assert made.status_code == 202, made.text
    mine = made.json()["id"]
    listed = secured.get("/v1/batches", headers={"X-API-Key": alice}).json()
    assert [b["id"] for b in listed["items"]] == [mine] and listed["total"] == 1
    theirs = secured.get("/v1/batches", headers={"X-API-Key": bob}).json()
    assert theirs == {"items": [], "total": 0, "limit": 50, "offset": 0}
    admin = secured.get("/v1/batches", headers={"X-API-Key": new_key(secured, "admin")})
    assert [b["id"] for b in admin.json()["items"]] == [mine]
    assert secured.get("/v1/batches").status_code == 401


def test_the_sdk_lists_batches(batch_client: TestClient) -> None:
    from app.sdk import PlannerClient

    batch_id = _submit(batch_client, "a")
    with PlannerClient("http://testserver", transport=batch_client._transport) as sdk:
        page = sdk.list_batches(limit=10)
    assert page["limit"] == 10 and [b["id"] for b in page["items"]] == [batch_id]


def test_the_list_is_one_tagged_operation(batch_client: TestClient) -> None:
    operation = batch_client.get("/openapi.json").json()["paths"]["/v1/batches"]["get"]
    assert operation["tags"] == ["batches"] and operation["operationId"] == "list_batches"


def test_the_cli_lists_a_servers_batches(live_server: str, tmp_path: Path) -> None:
    from tests.app.batches.test_batches import run_cli

    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([{"name": "listed", **GOOD}]), encoding="utf-8")
    assert (
        run_cli("batch", str(jobs), "-o", str(tmp_path / "out.csv"), "--server", live_server)[0]
        == 0
    )
    code, out, err = run_cli("batches", "--server", live_server)
    assert code == 0, err
    assert "finished" in out and "1/1" in out and "listed" in out
    code, out, _ = run_cli("batches", "--server", live_server, "--json", "--limit", "5")
    page = json.loads(out)
    assert code == 0 and page["limit"] == 5 and page["items"][0]["names"] == ["listed"]
    code, _, err = run_cli("batches", "--server", live_server, "--limit", "0")
    assert code == 2 and "--limit" in err
