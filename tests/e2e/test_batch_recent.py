"""Past batches in a browser (web9): a batch submitted and left is found again on /batches,
newest first, with its status and CSV; the list fits a 390 px phone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_batch_page import phone  # noqa: F401 (fixture: a 390 px page)

pytestmark = pytest.mark.e2e

ROWS = (
    "name,model,gpu,num_gpus,gpus_per_node,seq_length,global_batch_size\n"
    "left-8b,llama3.1-8b,h100-sxm-80gb,16,8,4096,128\n"
    "left-moe,mixtral-8x22b,h100-sxm-80gb,256,8,4096,1024\n"
)


def _submit(page: Page, server: str) -> str:
    page.goto(server + "/batches")
    page.get_by_label("Or paste the rows").fill(ROWS)
    page.get_by_role("button", name="Plan the batch").click()
    expect(page).to_have_url(re.compile(r"/batches/[0-9a-f-]{36}$"))
    return page.url.rsplit("/", 1)[1]


def test_a_batch_left_behind_is_found_on_the_batch_page(page: Page, server: str) -> None:
    batch_id = _submit(page, server)
    page.goto(server + "/")  # away, as a user does while it runs
    page.get_by_role("link", name="Batch").click()
    recent = page.locator("#recent-table")
    first = recent.locator("tbody tr").first
    expect(first.locator("th")).to_contain_text(batch_id[:8])
    expect(first.locator("th")).to_contain_text("left-8b, left-moe")
    # the list polls itself while a batch runs: no reload needed to see it finish
    expect(first).to_have_attribute("data-status", "finished", timeout=30_000)
    expect(first).to_contain_text("2 done")
    expect(first.get_by_role("link", name=f"CSV of batch {batch_id[:8]}")).to_be_visible()
    first.get_by_role("link", name=batch_id[:8], exact=True).click()
    expect(page).to_have_url(re.compile(f"/batches/{batch_id}$"))
    expect(page.locator("#batch-jobs tbody tr")).to_have_count(2)


def test_the_recent_list_fits_a_phone(phone: Page, server: str) -> None:  # noqa: F811
    _submit(phone, server)
    phone.goto(server + "/batches")
    expect(phone.locator("#recent-table tbody tr").first).to_be_visible()
    widths = phone.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"page is {widths[0]} px wide in a {widths[1]} px window"
