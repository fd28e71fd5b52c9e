"""Runs of deleted clusters in a browser (web9): the calibration page lists each former name
with its counts, downloads its runs as the JSON the upload form takes, and deletes a group
after a confirmation that counts it (keyboard only: the confirm button has the focus)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import start_server
from tests.e2e.test_judge_delete import _cluster_with_rows

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def data_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path_factory.mktemp("detached-db")
    proc, url = start_server(data_dir)
    yield url, data_dir / "planner.db"
    proc.terminate()
    proc.wait(10)


def _detached(page: Page, server: str, db: Path, slug: str) -> None:
    """A cluster with the 8 example runs whose catalog entry is then deleted behind the API's
    409 (as a script or an older release could): its runs stay, detached."""
    _cluster_with_rows(page, server, slug)
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA foreign_keys = ON")
        con.execute("DELETE FROM catalog_entry WHERE slug = ? AND kind = 'cluster'", (slug,))
    listed = page.request.get(f"{server}/v1/detached-measurements").json()["items"]
    assert slug in [i["cluster"] for i in listed]


def test_detached_runs_are_listed_and_deleted_after_a_counted_confirmation(
    page: Page, data_server: tuple[str, Path]
) -> None:
    server, db = data_server
    _detached(page, server, db, "e2e-gone")
    page.goto(server + "/calibration")
    table = page.locator("#detached-table")
    expect(table).to_contain_text("e2e-gone")
    expect(table.locator("tr", has_text="e2e-gone")).to_contain_text("8")
    page.get_by_role("button", name="Delete 8 rows of e2e-gone").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#detached-confirm")).to_contain_text("left 8 measurements")
    confirm = page.get_by_role(
        "button", name="Delete 8 measurements and 0 calibrations of e2e-gone"
    )
    expect(confirm).to_be_focused()
    page.keyboard.press("Enter")
    status = page.locator("#detached-status")
    expect(status).to_contain_text("Deleted 8 detached measurements")
    expect(status).to_be_focused()  # read out, and in view at the foot of a long page
    expect(page.locator("#detached")).not_to_contain_text("Delete 8 rows")
    assert page.request.get(f"{server}/v1/detached-measurements").json()["items"] == []


def test_detached_runs_download_as_the_upload_forms_json(
    page: Page, data_server: tuple[str, Path], tmp_path: Path
) -> None:
    server, db = data_server
    _detached(page, server, db, "e2e-copy")
    page.goto(server + "/calibration")
    with page.expect_download() as info:
        page.get_by_role("link", name="Download runs of e2e-copy (JSON)").click()
    saved = tmp_path / "runs.json"
    info.value.save_as(saved)
    rows = json.loads(saved.read_text())
    assert len(rows) == 8 and all("tokens_per_sec_per_gpu" in r or "step_time_s" in r for r in rows)
    # the way back to a cluster: the upload form takes the file as it came
    page.locator("#cluster").select_option("dgx-h100")
    page.locator("#file").set_input_files(str(saved))
    page.get_by_role("button", name="Fit and compare").click()
    expect(page.locator("#fit-title")).to_contain_text("Fit on 8 measured runs")


def test_the_detached_rows_are_cards_on_a_phone(
    browser: Browser, data_server: tuple[str, Path]
) -> None:
    server, db = data_server
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    _detached(page, server, db, "e2e-a-long-former-cluster-name-with-no-breaks")
    page.goto(server + "/calibration")
    stored = page.locator("#detached-table td[data-label='Stored (UTC)']").first
    expect(stored).to_be_visible()
    box = stored.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390, box  # not scrolled out of view
    widths = page.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"page is {widths[0]} px wide in a {widths[1]} px window"
    context.close()
