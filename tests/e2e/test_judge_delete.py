"""Deleting from the pages in a browser (QA round 8): a user cluster with stored runs is
deleted only after a confirmation that counts them; keyboard only, Enter confirms."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e

EXAMPLE_ROWS = Path(__file__).parents[2] / "examples" / "measurements.csv"
CLUSTER = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 5e10}


def _cluster_with_rows(page: Page, server: str, slug: str) -> None:
    made = page.request.post(f"{server}/v1/clusters", data={"slug": slug, "spec": CLUSTER})
    assert made.status == 201, made.text()
    rows = page.request.post(
        f"{server}/v1/clusters/{slug}/measurements",
        data=EXAMPLE_ROWS.read_bytes(),
        headers={"content-type": "text/csv"},
    )
    assert rows.status == 201, rows.text()


def test_a_cluster_with_rows_is_deleted_after_a_counted_confirmation(
    page: Page, server: str
) -> None:
    _cluster_with_rows(page, server, "e2e-del")
    page.goto(server + "/catalog/clusters")
    page.get_by_role("button", name="Delete e2e-del").click()
    expect(page.locator("#confirm-delete")).to_contain_text("has 8 stored measurements")
    confirm = page.get_by_role("button", name="Delete e2e-del and its 8 stored measurements")
    expect(confirm).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#deleted-status")).to_contain_text("Deleted e2e-del")
    expect(page.locator("#catalog-table")).not_to_contain_text("e2e-del")


def test_keep_it_leaves_the_cluster_and_its_rows(page: Page, server: str) -> None:
    _cluster_with_rows(page, server, "e2e-keep")
    page.goto(server + "/catalog/clusters")
    page.get_by_role("button", name="Delete e2e-keep").click()
    page.get_by_role("link", name="Keep it").click()
    expect(page.locator("#catalog-table")).to_contain_text("e2e-keep")
    listed = page.request.get(f"{server}/v1/clusters/e2e-keep/measurements").json()
    assert len(listed["items"]) == 8


def test_the_calibration_page_deletes_stored_runs_on_the_second_press(
    page: Page, server: str
) -> None:
    _cluster_with_rows(page, server, "e2e-runs")
    page.goto(server + "/calibration")
    page.locator("#delete_cluster").select_option("e2e-runs")
    page.get_by_role("button", name="Delete stored runs").click()
    expect(page.locator("#delete-rows-status")).to_contain_text("e2e-runs has 8 stored")
    page.get_by_role("button", name="Delete 8 measurements and 0 calibrations of e2e-runs").click()
    expect(page.locator("#delete-rows-status")).to_contain_text("Deleted 8 stored measurements")
    listed = page.request.get(f"{server}/v1/clusters/e2e-runs/measurements").json()
    assert listed["items"] == []
