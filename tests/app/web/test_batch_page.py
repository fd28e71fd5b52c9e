"""The batch page: upload or paste a jobs file, follow its jobs, download the CSV; bad files.

The planning backend is the web tests' canned stand-in (tests/e2e/fake_planning.py: it knows
llama3.1-8b and mixtral-8x22b), so these tests check the page and the batch it stores.
"""

from __future__ import annotations

import csv
import io
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.batches.models import BatchRow
from app.batches.rows import OUTPUT_COLUMNS
from app.batches.schemas import MAX_BATCH_JOBS
from app.planning.models import PlanJobRow
from tests.app.web.test_web import build_app

HEADER = "name,model,gpu,num_gpus,gpus_per_node,seq_length,global_batch_size"
GOOD = (
    f"{HEADER}\nsmall,llama3.1-8b,h100-sxm-80gb,16,8,4096,128\n"
    "moe,mixtral-8x22b,h100-sxm-80gb,256,8,4096,1024\n"
)
YAML = """jobs:
  - name: yaml-one
    model: llama3.1-8b
    gpu: h100-sxm-80gb
    num_gpus: "16-64"
    seq_length: 4096
    global_batch_size: 128
"""


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(build_app(tmp_path)) as c:
        yield c


def upload(client: TestClient, name: str, body: bytes | str, **form: str) -> httpx.Response:
    data = body.encode() if isinstance(body, str) else body
    return client.post(
        "/batches",
        files={"jobs_file": (name, data, "application/octet-stream")},
        data=form,
        follow_redirects=False,
    )


def stored(client: TestClient) -> tuple[int, int]:
    """(batches, plan jobs) in the database."""
    with client.app.state.session_factory() as session:
        batches = session.scalar(select(func.count()).select_from(BatchRow))
        jobs = session.scalar(select(func.count()).select_from(PlanJobRow))
    return int(batches or 0), int(jobs or 0)


def wait_finished(client: TestClient, location: str, timeout_s: float = 15.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        html = client.get(f"{location}/status").text
        if 'data-status="finished"' in html:
            return html
        time.sleep(0.05)
    raise AssertionError(f"{location} did not finish in {timeout_s} s")


def error_block(html: str) -> str:
    match = re.search(
        r'<div class="field-error batch-errors" id="jobs-error" role="alert">.*?</div>', html, re.S
    )
    assert match is not None, "no error beside the upload field"
    return match.group(0)


def test_the_page_is_linked_from_the_navigation_and_labels_its_inputs(client: TestClient) -> None:
    home = client.get("/").text
    assert '<a href="/batches"' in home
    html = client.get("/batches").text
    assert 'href="/batches" aria-current="page"' in html
    ids = re.findall(r'<(?:input|select|textarea)[^>]*\bid="([^"]+)"', html)
    assert {"jobs_file", "jobs_text"} <= set(ids) <= set(re.findall(r'<label for="([^"]+)"', html))
    assert 'enctype="multipart/form-data"' in html


def test_an_uploaded_csv_becomes_a_batch_whose_rows_complete(client: TestClient) -> None:
    response = upload(client, "jobs.csv", GOOD)
    assert response.status_code == 303, response.text[:400]
    location = response.headers["location"]
    assert re.fullmatch(r"/batches/[0-9a-f-]{36}", location)
    html = wait_finished(client, location)
    assert "hx-get" not in html  # a finished batch stops polling
    rows = re.findall(r'<tr data-status="([a-z]+)">.*?<th scope="row">([^<]+)</th>', html, re.S)
    assert rows == [("done", "small"), ("done", "moe")]
    # the canned plan 1: tp=8, pp=4, vpp=2, dp=2; 4e6/4 s/64 GPUs tokens/s and its 80 % band
    assert "<code>TP8 PP4 VPP2 DP2 mbs1</code>" in html
    assert re.search(r"15,625<br><small class=\"interval\">14,062 to 17,188</small>", html)
    assert "GiB" in html
    job_ids = re.findall(r'href="/plans/([0-9a-f-]{36})"', html)
    assert len(job_ids) == 2
    assert client.get(f"/plans/{job_ids[0]}").status_code == 200  # the plan page opens
    assert stored(client) == (1, 2)


def test_the_results_csv_has_the_cli_columns(client: TestClient) -> None:
    location = upload(client, "jobs.csv", GOOD).headers["location"]
    html = wait_finished(client, location)
    assert f'href="{location}/results.csv"' in html
    response = client.get(f"{location}/results.csv")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert "attachment" in response.headers["content-disposition"]
    reader = csv.DictReader(io.StringIO(response.text))
    assert tuple(reader.fieldnames or ()) == OUTPUT_COLUMNS
    rows = list(reader)
    assert [(r["name"], r["rank"]) for r in rows] == [
        ("small", "1"), ("small", "2"), ("small", "3"), ("moe", "1"), ("moe", "2"), ("moe", "3")
    ]  # fmt: skip
    assert rows[0]["tp"] == "8" and rows[0]["error"] == ""


def test_pasted_yaml_is_read_like_the_cli_reads_a_yaml_file(client: TestClient) -> None:
    response = client.post("/batches", data={"jobs_text": YAML}, follow_redirects=False)
    assert response.status_code == 303, response.text[:400]
    html = wait_finished(client, response.headers["location"])
    assert '<th scope="row">yaml-one</th>' in html
    with client.app.state.session_factory() as session:
        request = session.scalars(select(PlanJobRow.request)).one()
    assert request["num_gpus_options"] == [16, 32, 64]  # the range, expanded as the CLI does


def test_a_bad_cell_names_its_row_and_column_and_stores_nothing(client: TestClient) -> None:
    bad = GOOD + "third,llama3.1-8b,h100-sxm-80gb,many,8,4096,0\n"
    response = upload(client, "jobs.csv", bad)
    assert response.status_code == 422
    block = error_block(response.text)
    assert "row 3 (third, line 4), column num_gpus: num_gpus must be a whole number, got" in block
    assert 'aria-invalid="true"' in response.text
    assert 'aria-describedby="jobs-error' in response.text
    assert "third,llama3.1-8b" in response.text  # kept to correct
    assert stored(client) == (0, 0)


def test_every_bad_cell_of_a_row_is_listed(client: TestClient) -> None:
    bad = f"{HEADER},colour\nx,llama3.1-8b,h100-sxm-80gb,16,8,-1,128,blue\n"
    block = error_block(upload(client, "jobs.csv", bad).text)
    assert "row 1 (x, line 2), column seq_length:" in block
    assert "row 1 (x, line 2), column colour: unknown field &#39;colour&#39;" in block


def test_an_unknown_model_rejects_the_whole_file(client: TestClient) -> None:
    bad = GOOD + "ghost,no-such-model,h100-sxm-80gb,16,8,4096,128\n"
    response = upload(client, "jobs.csv", bad)
    assert response.status_code == 422
    block = error_block(response.text)
    assert "row 3 (ghost, line 4): unknown model &#39;no-such-model&#39;" in block
    assert stored(client) == (0, 0)  # the two good rows were rolled back with it


def test_cell_errors_and_unknown_models_are_reported_together(client: TestClient) -> None:
    bad = GOOD + "ghost,no-such-model,h100-sxm-80gb,16,8,4096,128\nthird,llama3.1-8b,h100,x,8,1,1\n"
    items = re.findall(r"<li>(.*?)</li>", error_block(upload(client, "j.csv", bad).text))
    assert [i.split(":")[0] for i in items] == [
        "row 3 (ghost, line 4)",
        "row 4 (third, line 5), column num_gpus",
    ]
    assert stored(client) == (0, 0)


@pytest.mark.parametrize(
    ("name", "body", "says"),
    [
        ("jobs.csv", "", "jobs.csv is empty: give a header line naming the columns"),
        ("jobs.csv", HEADER + "\n", "jobs.csv has a header but no jobs"),
        ("jobs.xlsx", GOOD, "jobs.xlsx is not a CSV or YAML file"),
        ("jobs.csv", b"PK\x03\x04\xff\xfe\x00binary", "jobs.csv is not text"),
        ("jobs.yaml", "jobs: [unclosed", "jobs.yaml: cannot parse"),
        ("jobs.yaml", "just a sentence", "jobs.yaml: expected a list of job objects"),
        ("jobs.csv", "a;b;c\n1;2;3\n", "names no job column"),
    ],
)
def test_a_file_that_is_not_jobs_says_why(
    client: TestClient, name: str, body: str | bytes, says: str
) -> None:
    response = upload(client, name, body)
    assert response.status_code == 422
    assert says in error_block(response.text)
    assert stored(client) == (0, 0)


def test_a_file_over_the_batch_limit_says_so(client: TestClient) -> None:
    row = "j,llama3.1-8b,h100-sxm-80gb,16,8,4096,128\n"
    response = upload(client, "big.csv", HEADER + "\n" + row * (MAX_BATCH_JOBS + 1))
    assert response.status_code == 422
    assert "big.csv has 2,001 jobs; a batch takes at most 2,000" in response.text
    assert stored(client) == (0, 0)


def test_nothing_chosen_or_pasted_asks_for_a_file(client: TestClient) -> None:
    response = client.post("/batches", data={"jobs_text": "  "})
    assert response.status_code == 422
    assert "choose a jobs file" in error_block(response.text)


def test_results_wait_until_every_job_has_finished(tmp_path: Path) -> None:
    gate = threading.Event()
    with TestClient(build_app(tmp_path, gate)) as client:
        location = upload(client, "jobs.csv", GOOD).headers["location"]
        html = client.get(location).text
        assert f'hx-get="{location}/status"' in html  # polls while jobs run
        assert '<meta http-equiv="refresh"' in html  # and refreshes without script
        assert "results.csv" not in html
        assert client.get(f"{location}/results.csv").status_code == 409
        gate.set()
        wait_finished(client, location)


def test_an_unknown_batch_is_a_404_page(client: TestClient) -> None:
    response = client.get("/batches/no-such-batch", headers={"accept": "text/html"})
    assert response.status_code == 404
    assert "no batch" in response.text and "<html" in response.text


def test_signed_in_batches_need_the_csrf_token_and_stay_their_keys(
    make_client: Callable[..., TestClient],
) -> None:
    from tests.app.keys.test_auth import GOOD_SECRET, _sign_in, new_key

    secured = make_client(auth="api-key", secret_key=GOOD_SECRET)
    jobs = f"{HEADER}\nseventy,llama3.1-70b,h100-sxm-80gb,64,8,8192,128\n"
    assert secured.get("/batches", follow_redirects=False).status_code == 303  # to /login
    token = _sign_in(secured, new_key(secured, "plan"))
    files = {"jobs_file": ("jobs.csv", jobs.encode(), "text/csv")}
    forged = secured.post("/batches", files=files, data={"csrf_token": "forged"})
    assert forged.status_code == 403
    assert stored(secured) == (0, 0)
    response = secured.post(
        "/batches", files=files, data={"csrf_token": token}, follow_redirects=False
    )
    assert response.status_code == 303, response.text[:400]
    location = response.headers["location"]
    assert secured.get(location).status_code == 200
    _sign_in(secured, new_key(secured, "plan"))  # another key sees no such batch
    assert secured.get(location, headers={"accept": "text/html"}).status_code == 404
    assert secured.get(f"{location}/results.csv").status_code == 404
    token = _sign_in(secured, new_key(secured, "read"))  # a read key may not plan a batch
    denied = secured.post("/batches", files=files, data={"csrf_token": token})
    assert denied.status_code == 403
