"""A double click on "Find the best layouts" (QA round 8): both posts carry the page's one
``submission`` token, so they are one plan job, not two searches of the same request."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from fastapi.testclient import TestClient

from app.planning.schemas import FINISHED
from tests.app.web.test_web import FORM, build_app, client  # noqa: F401 (fixture)

HTMX = {"HX-Request": "true"}


def _jobs(client: TestClient) -> int:  # noqa: F811
    return int(client.get("/v1/plan-jobs?limit=1").json()["total"])


def _token(html: str) -> str:
    match = re.search(r'name="submission" value="([^"]+)"', html)
    assert match is not None, "the form carries no submission token"
    return match.group(1)


def test_the_same_form_posted_twice_is_one_job(client: TestClient) -> None:  # noqa: F811
    token = _token(client.get("/").text)
    first = client.post("/plans", data=FORM | {"submission": token}, follow_redirects=False)
    second = client.post("/plans", data=FORM | {"submission": token}, follow_redirects=False)
    assert first.status_code == second.status_code == 303
    assert first.headers["location"] == second.headers["location"]
    assert _jobs(client) == 1


def test_the_returned_form_keeps_the_token_and_new_values_are_a_new_job(
    client: TestClient,  # noqa: F811
) -> None:
    token = _token(client.get("/").text)
    shown = client.post("/plans", data=FORM | {"submission": token}, headers=HTMX)
    assert _token(shown.text) == token  # the second click of a double click hits this form
    client.post("/plans", data=FORM | {"submission": token}, headers=HTMX)
    assert _jobs(client) == 1
    client.post("/plans", data=FORM | {"submission": token, "top_k": "5"}, headers=HTMX)
    assert _jobs(client) == 2


def test_each_page_gets_its_own_token(client: TestClient) -> None:  # noqa: F811
    assert _token(client.get("/").text) != _token(client.get("/").text)
    for bad in ("", "short", "x" * 65, "../../etc"):  # not a token: a fresh one, no error
        r = client.post("/plans", data=FORM | {"submission": bad}, follow_redirects=False)
        assert r.status_code == 303
    assert _jobs(client) == 4


def test_a_retry_of_a_cancelled_search_is_a_new_job(tmp_path: Path) -> None:
    gate = threading.Event()  # holds the search until the test has cancelled it
    with TestClient(build_app(tmp_path, gate)) as c:
        token = _token(c.get("/").text)
        first = c.post("/plans", data=FORM | {"submission": token}, follow_redirects=False)
        job_id = first.headers["location"].rsplit("/", 1)[-1]
        c.post(f"/v1/plan-jobs/{job_id}/cancel")
        gate.set()
        deadline = time.monotonic() + 10
        while c.get(f"/v1/plan-jobs/{job_id}").json()["status"] not in FINISHED:
            assert time.monotonic() < deadline, "the cancelled job did not finish in 10 s"
            time.sleep(0.05)
        assert c.get(f"/v1/plan-jobs/{job_id}").json()["status"] == "cancelled"
        again = c.post("/plans", data=FORM | {"submission": token}, follow_redirects=False)
        assert again.headers["location"] != first.headers["location"]
