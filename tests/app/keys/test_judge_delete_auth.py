"""The pages' delete buttons under sign-in (QA round 8): they need the session's CSRF token
and the admin scope, as the catalog and calibration forms do."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.keys.test_auth import _sign_in, new_key
from tests.app.keys.test_auth import secured as secured  # the fixture

CLUSTER = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 5e10}


def _user_cluster(client: TestClient, admin: str) -> None:
    made = client.post(
        "/v1/clusters", json={"slug": "mine", "spec": CLUSTER}, headers={"X-API-Key": admin}
    )
    assert made.status_code == 201, made.text


def test_a_delete_needs_the_csrf_token_and_the_admin_scope(secured: TestClient) -> None:
    admin = new_key(secured, "admin")
    _user_cluster(secured, admin)
    token = _sign_in(secured, new_key(secured, "plan"))
    asked = {"confirm": "1", "csrf_token": token}
    assert secured.post("/catalog/clusters/mine/delete", data=asked).status_code == 403
    token = _sign_in(secured, admin)
    no_token = secured.post("/catalog/clusters/mine/delete", data={"confirm": "1"})
    assert no_token.status_code == 403
    page = secured.get("/catalog/clusters").text
    assert (
        f'name="csrf_token" value="{token}"><button type="submit" aria-label="Delete mine"' in page
    )
    done = secured.post(
        "/catalog/clusters/mine/delete", data=asked | {"csrf_token": token}, follow_redirects=False
    )
    assert done.status_code == 303
    gone = secured.get("/v1/clusters/mine", headers={"X-API-Key": admin})
    assert gone.status_code == 404
