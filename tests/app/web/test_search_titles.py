"""What one search was asked, on its pages (web11): two searches that differ in one setting
had the same heading and title ('llama3.1-8b on 64 × h100-sxm-80gb', 'Plan 1 · ...')."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.web import job_summary
from tests.app.web.test_web import build_app, submit, wait_done


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(build_app(tmp_path)) as c:
        yield c


def _title(html: str) -> str:
    found = re.search(r"<title>(.*?)</title>", html, re.S)
    assert found is not None, html[:300]
    return found.group(1)


def test_two_searches_differing_in_sequence_length_have_their_own_titles(
    client: TestClient,
) -> None:
    short, long = submit(client), submit(client, seq_length="32768")
    wait_done(client, short)
    wait_done(client, long)
    short_page, long_page = client.get(short).text, client.get(long).text
    assert _title(short_page).startswith(
        "Plans: mixtral-8x22b on 256 × h100-sxm-80gb, sequence 4,096 tokens, global batch 1,024"
    )
    assert "sequence 32,768 tokens" in _title(long_page)
    assert 'id="job-asked">mixtral-8x22b on 256 × h100-sxm-80gb, sequence 32,768' in long_page


def test_a_plan_page_title_names_the_layout_and_the_search(client: TestClient) -> None:
    location = submit(client, seq_length="8192")
    wait_done(client, location)
    html = client.get(f"{location}/2").text
    title = _title(html)
    assert re.match(r"Plan 2: TP\d+ PP\d+ .* · mixtral-8x22b on 256 × h100-sxm-80gb, ", title)
    assert "sequence 8,192 tokens" in title
    assert 'id="plan-asked"' in html


def test_the_progress_fragment_renames_the_page_and_says_how_it_ended(
    client: TestClient,
) -> None:
    location = submit(client)
    fragment = wait_done(client, location)
    assert fragment.startswith("<title>Plans: mixtral-8x22b on 256 × h100-sxm-80gb")
    announce = re.search(r'data-announce="([^"]*)"', fragment)
    assert announce is not None
    assert re.fullmatch(
        r"Search finished: \d+ plans? shown; the best is TP\d+ .* at [\d,]+ tokens/s per GPU\.",
        announce.group(1),
    )


def test_a_pasted_spec_and_a_cluster_are_named() -> None:
    asked = {
        "model": {"name": "mistral", "num_layers": 32},
        "cluster": "dgx-h100",
        "num_gpus": 1024,
        "seq_length": 8192,
        "precision": "fp8",
    }
    assert job_summary.summary(asked) == ("mistral on 1,024 × dgx-h100, sequence 8,192 tokens, fp8")
    nameless = {"model": {"hf_config": {"model_type": "qwen2"}}, "gpu": "h100-sxm-80gb"}
    assert job_summary.summary(nameless) == "qwen2 on h100-sxm-80gb"
    assert job_summary.model_name({"model": {"num_layers": 2}}) == "your model"
    assert job_summary.page_title(asked, finished=True, status="failed").startswith(
        "Search failed: mistral"
    )


@pytest.fixture(scope="module")
def real_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(location, page) of one search by the real planner (its funnel and its bands)."""
    from app.core.settings import Settings
    from app.main import create_app
    from app.web import mount_static, router

    data_dir = tmp_path_factory.mktemp("real-web")
    settings = Settings(data_dir=data_dir, job_poll_s=0.05, job_heartbeat_s=0.05)
    app = create_app(settings)
    if not any(getattr(r, "path", None) == "/plans/{job_id}" for r in app.routes):
        app.include_router(router)
    if not any(getattr(r, "path", None) == "/static" for r in app.routes):
        mount_static(app)
    with TestClient(app) as real:
        job = {"model": "llama3.1-8b", "num_gpus": "16", "seq_length": "32768"}
        location = submit(real, **job, global_batch_size="16", recompute=["none", "selective"])
        wait_done(real, location, timeout_s=60)
        return location, real.get(location).text


def test_the_stack_choices_line_says_what_its_counts_are(real_page: tuple[str, str]) -> None:
    """'The planner chose: cp_comm_type p2p 294, all_gather 163' left a first-time user to
    guess what the numbers counted."""
    line = re.search(r'<p class="search-meta" id="stack-choices">(.*?)</p>', real_page[1])
    assert line is not None
    assert line.group(1).startswith(
        "Stack settings the search chose, with how many of the layouts it weighed got each: "
        "cp_comm_type "
    )
    assert "Each plan's page and launch command say which one it uses." in line.group(1)


def test_the_results_say_which_plan_to_launch_how_fast_how_sure_and_how_big(
    real_page: tuple[str, str],
) -> None:
    """The table gave no band and no way to the launch command but 'Details' on each row."""
    location, html = real_page
    pick = re.search(r'<div class="best-pick" id="best-pick">(.*?)</div>', html, re.S)
    assert pick is not None
    text = re.sub(r"[ \n]+", " ", re.sub(r"<[^>]+>", "", pick.group(1))).strip()
    assert re.search(r"Launch plan 1: TP\d+ PP\d+ .*mbs\d+ recompute \w+", text), text
    assert re.search(
        r"[\d,]+ tokens/s per GPU \(80 % likely between [\d,]+ and [\d,]+\), "
        r"[\d.]+\xa0s per step, [\d.]+\xa0GiB of [\d.]+\xa0GiB per GPU\.",
        text,
    ), text
    assert f'href="{location}/1#launch-title">Copy its launch command</a>' in pick.group(1)


def test_every_page_of_the_menu_has_a_title_of_its_own(client: TestClient) -> None:
    """The plan form was titled with the bare site name, as every page is at its end."""
    pages = ["/", "/batches", "/catalog/models", "/catalog/gpus", "/catalog/clusters"]
    pages += ["/scaling", "/calibration"]
    titles = [_title(client.get(path).text) for path in pages]
    assert titles[0] == "Plan a training run · Parallel Planner"
    assert len(set(titles)) == len(titles), titles
    assert all(t.endswith(" · Parallel Planner") for t in titles), titles


def test_a_result_is_compared_with_the_recent_searches(client: TestClient) -> None:
    """Comparing two searches meant Back, Forward and keeping the numbers in mind."""
    first = submit(client)
    wait_done(client, first)
    again = submit(client)  # the same request: the same answer, listed once
    wait_done(client, again)
    second = submit(client, seq_length="32768")
    html = wait_done(client, second)
    table = re.search(r'<table id="recent-searches">(.*?)</table>', html, re.S)
    assert table is not None
    rows = re.findall(r"<tr[ >](.*?)</tr>", table.group(1), re.S)[1:]  # past the head
    assert len(rows) == 2, rows
    assert "sequence 32,768 tokens" in rows[0] and "(this one)" in rows[0]
    assert f'href="{first}">mixtral-8x22b on 256 × h100-sxm-80gb, sequence 4,096' in rows[1] or (
        f'href="{again}">mixtral-8x22b on 256 × h100-sxm-80gb, sequence 4,096' in rows[1]
    )
    assert re.search(r"<code>TP\d+ PP\d+ .*</code>", rows[1])


def test_a_first_search_has_nothing_to_compare_with_even_after_a_batch(
    client: TestClient,
) -> None:
    """A batch's jobs are plan jobs too: they belong to the batch page, not to this list."""
    from tests.app.web.test_batch_page import GOOD, upload, wait_finished

    batch = upload(client, "jobs.csv", GOOD)
    assert batch.status_code == 303, batch.text[:300]
    wait_finished(client, batch.headers["location"])
    location = submit(client)
    assert 'id="recent-searches"' not in wait_done(client, location)


def test_the_config_file_loader_waits_for_the_script(client: TestClient) -> None:
    """Reading a file into the text box needs form.js: without it the control is hidden."""
    html = client.get("/").text
    assert '<div class="file-load" id="hf_config_loader" hidden>' in html
    assert '<input type="file" id="hf_config_file"' in html  # no name: the file is never posted
    assert 'name="hf_config_file"' not in html
