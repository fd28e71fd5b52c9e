"""The batch page lists past batches (stored rows, newest first, a key's own unless admin) with
their status and CSV links; a running batch's finished rows download while it runs."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.planning.models import PlanJobRow
from tests.app.web.test_batch_page import GOOD, upload, wait_finished
from tests.app.web.test_web import build_app


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(build_app(tmp_path)) as c:
        yield c


def _finished_batch(client: TestClient) -> str:
    location = upload(client, "jobs.csv", GOOD).headers["location"]
    wait_finished(client, location)
    return location.rsplit("/", 1)[1]


def _mark_running(client: TestClient, batch_id: str, name_index: int) -> None:
    """One job of a finished batch set back to running (a batch caught half done)."""
    with client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.batch_id == batch_id, PlanJobRow.batch_index == name_index)
            .values(status="running", result=None, finished_at=None)
        )
        session.commit()


def test_no_batches_yet_is_said(client: TestClient) -> None:
    assert "No batches yet" in client.get("/batches").text


def test_a_finished_batch_is_listed_with_its_link_and_csv(client: TestClient) -> None:
    batch_id = _finished_batch(client)
    html = client.get("/batches").text
    assert f'<a href="/batches/{batch_id}"><code>{batch_id[:8]}</code></a>' in html
    assert "small, moe" in html  # its first job names
    assert f'href="/batches/{batch_id}/results.csv" download' in html
    assert "2 done" in html


def test_the_newest_batch_comes_first(client: TestClient) -> None:
    first, second = _finished_batch(client), _finished_batch(client)
    html = client.get("/batches").text
    assert html.index(second[:8]) < html.index(first[:8])
    assert "All 2 batches stored on this server" in html


def test_a_rejected_file_keeps_the_list(client: TestClient) -> None:
    batch_id = _finished_batch(client)
    r = upload(client, "jobs.csv", "name,model\nx,nope\n")
    assert r.status_code == 422
    assert batch_id[:8] in r.text


def test_a_running_batch_offers_the_rows_so_far(client: TestClient) -> None:
    batch_id = _finished_batch(client)
    _mark_running(client, batch_id, 1)
    listing = client.get("/batches").text
    assert f'href="/batches/{batch_id}/results.csv?partial=1" download' in listing
    assert "(1 of 2 jobs)" in listing
    page = client.get(f"/batches/{batch_id}/status").text
    assert 'id="results-csv-so-far"' in page and "1 of 2 jobs finished" in page
    full = client.get(f"/batches/{batch_id}/results.csv")
    assert full.status_code == 409  # the whole CSV waits for every job
    so_far = client.get(f"/batches/{batch_id}/results.csv?partial=1")
    assert so_far.status_code == 200
    assert "so-far" in so_far.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(so_far.text)))
    by_job = {r["name"]: r for r in rows}
    assert by_job["moe"]["error"] == "still running"
    assert not by_job["small"]["error"]


def test_a_key_lists_its_own_batches_and_an_admin_all(client: TestClient) -> None:
    from app.batches.service import BatchService
    from app.security.ownership import Viewer

    state = client.app.state  # type: ignore[attr-defined]
    job = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16,
           "seq_length": 4096, "global_batch_size": 128}  # fmt: skip
    alice, bob = Viewer(key_id="alice", admin=False), Viewer(key_id="bob", admin=False)
    with state.session_factory() as session:
        mine = BatchService(session, state.backend, alice).submit([job]).id
        BatchService(session, state.backend, bob).submit([job, job])
        session.commit()
        listed, total = BatchService(session, state.backend, alice).recent()
        assert ([b["id"] for b in listed], total) == ([mine], 1)
        admin = Viewer(key_id=None, admin=True)
        assert BatchService(session, state.backend, admin).recent(limit=1)[1] == 2
        assert len(BatchService(session, state.backend, admin).recent(limit=1)[0]) == 1


def test_the_list_polls_itself_only_while_a_batch_runs(client: TestClient) -> None:
    batch_id = _finished_batch(client)
    assert 'hx-get="/batches/recent"' not in client.get("/batches").text
    _mark_running(client, batch_id, 1)
    assert 'hx-get="/batches/recent"' in client.get("/batches").text
    fragment = client.get("/batches/recent")
    assert fragment.status_code == 200
    assert 'id="recent-batches"' in fragment.text and "<html" not in fragment.text
    assert "1 of 2 finished" in fragment.text
