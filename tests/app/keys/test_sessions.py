"""Web sessions are server-side and bound to their key; /v1 takes a session only with CSRF."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import LAYOUT_70B
from tests.app.keys.test_auth import _sign_in, new_key
from tests.app.keys.test_auth import secured as secured  # the fixture


def test_sign_out_ends_the_session_even_for_a_kept_cookie(secured: TestClient) -> None:
    token = _sign_in(secured, new_key(secured, "read"))
    kept = secured.cookies.get("planner_session")
    assert secured.post("/logout", data={"csrf_token": token}).status_code == 200
    secured.cookies.set("planner_session", kept)  # a copy of the cookie taken before sign-out
    assert secured.get("/", follow_redirects=False).status_code == 303


def test_revoking_the_key_ends_its_sessions(secured: TestClient) -> None:
    admin = new_key(secured, "admin")
    key = new_key(secured, "plan")
    _sign_in(secured, key)
    key_id = secured.get("/v1/keys", headers={"X-API-Key": admin}).json()["items"][1]["id"]
    revoked = secured.delete(f"/v1/keys/{key_id}", headers={"X-API-Key": admin})
    assert revoked.status_code == 200
    assert secured.get("/", follow_redirects=False).status_code == 303


def test_a_session_of_another_key_cannot_be_reused_for_a_second_key(secured: TestClient) -> None:
    _sign_in(secured, new_key(secured, "read"))
    cookie = secured.cookies.get("planner_session")
    assert cookie
    signer = secured.app.state.authenticator.signer  # type: ignore[attr-defined]
    web = signer.read(cookie)
    other = new_key(secured, "admin")
    with secured.app.state.session_factory() as session:  # type: ignore[attr-defined]
        from sqlalchemy import select

        from app.keys.models import ApiKeyRow

        other_id = session.scalar(select(ApiKeyRow.id).where(ApiKeyRow.prefix == other[3:15]))
    assert other_id
    forged, _ = signer.issue(other_id, other[3:15], ("admin",), web.session_id)
    secured.cookies.set("planner_session", forged)  # signed, but the row belongs to another key
    assert secured.get("/", follow_redirects=False).status_code == 303


def test_v1_write_with_a_session_cookie_and_no_csrf_header_is_refused(
    secured: TestClient,
) -> None:
    _sign_in(secured, new_key(secured, "admin"))
    response = secured.post("/v1/evaluations", json=LAYOUT_70B)
    assert response.status_code == 403
    assert "X-CSRF-Token" in response.json()["detail"]
    cancel = secured.post("/v1/plan-jobs/0000/cancel")
    assert cancel.status_code == 403
    upload = secured.post(
        "/v1/clusters/dgx-h100/measurements",
        content="a,b\n1,2\n",
        headers={"content-type": "text/csv"},
    )
    assert upload.status_code == 403


def test_v1_read_with_a_session_cookie_needs_the_csrf_header_too(secured: TestClient) -> None:
    token = _sign_in(secured, new_key(secured, "read"))
    assert secured.get("/v1/models").status_code == 403
    assert secured.get("/v1/models", headers={"X-CSRF-Token": "forged"}).status_code == 403
    assert secured.get("/v1/models", headers={"X-CSRF-Token": token}).status_code == 200


def test_v1_write_with_the_sessions_csrf_header_is_allowed(secured: TestClient) -> None:
    token = _sign_in(secured, new_key(secured, "plan"))
    response = secured.post("/v1/evaluations", json=LAYOUT_70B, headers={"X-CSRF-Token": token})
    assert response.status_code == 200


def test_an_api_key_needs_no_csrf_header(secured: TestClient) -> None:
    key = new_key(secured, "plan")
    response = secured.post("/v1/evaluations", json=LAYOUT_70B, headers={"X-API-Key": key})
    assert response.status_code == 200
