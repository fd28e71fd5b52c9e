"""The batch page in a real Chromium against the real planner: upload examples/jobs.csv, see its
rows complete, download the results; a bad file is refused beside the upload field; a phone."""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from app.batches.rows import OUTPUT_COLUMNS

pytestmark = pytest.mark.e2e
JOBS = Path(__file__).parents[2] / "examples" / "jobs.csv"


@pytest.fixture(scope="module")
def live(shared_real_server: str) -> str:
    return shared_real_server


@pytest.fixture()
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    yield page
    context.close()


def shoot(page: Page, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("PLANNER_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def test_upload_the_example_jobs_see_them_complete_and_download_the_csv(
    page: Page, live: str, tmp_path: Path
) -> None:
    page.goto(live + "/")
    page.get_by_role("link", name="Batch").click()
    expect(page.get_by_role("heading", name="Plan a batch of jobs")).to_be_visible()
    page.get_by_label("Jobs file").set_input_files(str(JOBS))
    page.get_by_role("button", name="Plan the batch").click()
    expect(page).to_have_url(re.compile(r"/batches/[0-9a-f-]{36}$"))
    # the table polls in place until every job has finished (4 jobs: about 10 s on 2 cores)
    expect(page.locator("#batch")).to_have_attribute("data-status", "finished", timeout=90_000)
    rows = page.locator("#batch-jobs tbody tr")
    expect(rows).to_have_count(4)
    names = [n for n, *_ in csv.reader(JOBS.read_text().splitlines()[1:])]
    expect(rows.locator("th")).to_have_text(names)
    planned = rows.filter(has=page.locator("td.layout"))
    expect(planned).to_have_count(3)  # llama3.1-405b on eight GPUs fits nothing
    expect(planned.first.locator("td.layout code")).to_have_text(re.compile(r"^TP\d+ PP\d+"))
    expect(rows.nth(3).locator("td.reason")).to_contain_text("no layout fits")
    expect(page.locator("#batch-summary")).to_contain_text("All 4 jobs finished")
    shoot(page, "batch-finished", tmp_path)
    with page.expect_download() as info:
        page.get_by_role("link", name="Download the results (CSV)").click()
    text = Path(info.value.path()).read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    assert tuple(reader.fieldnames or ()) == OUTPUT_COLUMNS
    got = list(reader)
    assert {r["name"] for r in got} == set(names)
    assert next(r["error"] for r in got if r["name"] == "llama405b-8").startswith(
        "no feasible layout"
    )
    page.get_by_role("link", name="Plans of llama8b-16").click()  # the plan's own page
    expect(page.locator("#plans-table")).to_be_visible(timeout=30_000)


def test_a_bad_file_is_refused_beside_the_upload_field_on_a_phone(
    phone: Page, live: str, tmp_path: Path
) -> None:
    bad = tmp_path / "jobs.csv"
    bad.write_text(JOBS.read_text().replace(",256,8,8192,", ",lots,8,8192,"))
    phone.goto(live + "/batches")
    phone.get_by_label("Jobs file").set_input_files(str(bad))
    phone.keyboard.press("Tab")  # the form is reachable and submits by keyboard
    phone.get_by_role("button", name="Plan the batch").focus()
    phone.keyboard.press("Enter")
    alert = phone.get_by_role("alert")
    expect(alert).to_contain_text("row 2 (llama70b-256, line 3), column num_gpus")
    expect(phone.get_by_label("Jobs file")).to_have_attribute("aria-invalid", "true")
    expect(phone.get_by_label("Or paste the rows")).to_have_value(re.compile("lots"))
    shoot(phone, "batch-bad-file-phone", tmp_path)
    widths = phone.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"page is {widths[0]} px wide in a {widths[1]} px window"
    # the corrected rows, pasted back, plan (no file chosen after the refusal)
    phone.get_by_label("Or paste the rows").fill(JOBS.read_text().splitlines()[0] + "\n"
                                                  + JOBS.read_text().splitlines()[1])  # fmt: skip
    phone.get_by_role("button", name="Plan the batch").click()
    expect(phone).to_have_url(re.compile(r"/batches/[0-9a-f-]{36}$"))
    expect(phone.locator("#batch")).to_have_attribute("data-status", "finished", timeout=60_000)
    shoot(phone, "batch-finished-phone", tmp_path)
    widths = phone.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"page is {widths[0]} px wide in a {widths[1]} px window"
