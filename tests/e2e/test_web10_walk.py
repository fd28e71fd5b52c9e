"""A judge's walk after web10, at phone width and with the keyboard only: the GPU form (add,
errors beside their fields, change), a reload of a saved calibration's page that stores
nothing again, and numbers in another script refused in the page with the accepted form."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.e2e

EXAMPLE_ROWS = Path(__file__).parents[2] / "examples" / "measurements.csv"


@pytest.fixture()
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    yield context.new_page()
    context.close()


def _api(url: str) -> Any:
    with urllib.request.urlopen(url) as response:
        return json.load(response)


def _counts(cluster_url: str) -> tuple[int, int]:
    """(stored measurements, calibrations) of a cluster, read through the API."""
    return (
        len(_api(cluster_url + "/measurements")["items"]),
        len(_api(cluster_url + "/calibrations")["items"]),
    )


def _no_sideways_scroll(page: Page) -> None:
    widths = page.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"page is {widths[0]} px wide in a {widths[1]} px window"


def _tab_to(page: Page, selector: str, limit: int = 80) -> None:
    """Press Tab until ``selector`` has the focus (a keyboard user's only way there)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("s => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"{selector} is not reachable with Tab")


def test_a_gpu_type_is_added_and_changed_with_the_keyboard_at_phone_width(
    phone: Page, server: str
) -> None:
    page = phone
    page.goto(server + "/catalog/gpus")
    _no_sideways_scroll(page)
    _tab_to(page, "#g-slug")
    page.keyboard.type("kb-gpu")
    _tab_to(page, "#g-hbm_gib")
    page.keyboard.type("٨٠")  # Arabic-Indic 80: not a number the page may read as 80
    _tab_to(page, "#g-hbm_bandwidth_gb_s")
    page.keyboard.type("3350")
    page.keyboard.press("Enter")
    expect(page.locator("#gpu-error-summary")).to_have_attribute("role", "alert")
    expect(page.locator("#g-hbm_gib-error")).to_contain_text("you typed '٨٠'")
    expect(page.locator("#g-hbm_gib-error")).to_contain_text("ASCII digits")
    expect(page.locator("#g-hbm_gib")).to_be_focused()  # the first field in error
    expect(page.locator("#g-hbm_gib")).to_have_attribute(
        "aria-describedby", "g-hbm_gib-error g-hbm_gib-hint"
    )
    _no_sideways_scroll(page)
    page.keyboard.press("Control+A")
    page.keyboard.type("80")
    for name, value in (("peak_bf16_tflop_s", "989"), ("intra_node_gb_s", "450")):
        _tab_to(page, f"#g-{name}")
        page.keyboard.type(value)
    page.keyboard.press("Enter")
    expect(page.locator("#saved-status")).to_contain_text("Saved kb-gpu")
    assert _api(server + "/v1/gpus/kb-gpu")["version"] == 1
    _tab_to(page, "a[aria-label='Edit kb-gpu']", limit=120)
    page.keyboard.press("Enter")
    expect(page.locator("#gpu-form-title")).to_contain_text("Change GPU type kb-gpu")
    _tab_to(page, "#g-peak_bf16_tflop_s", limit=120)
    page.keyboard.press("Control+A")
    page.keyboard.type("900")
    page.keyboard.press("Enter")
    expect(page.locator("#saved-status")).to_contain_text("Saved kb-gpu")
    entry = _api(server + "/v1/gpus/kb-gpu")
    assert entry["version"] == 2 and entry["spec"]["peak_bf16_flop_per_s"] == 900e12


def test_a_built_in_gpu_says_why_it_cannot_be_changed(phone: Page, server: str) -> None:
    phone.goto(server + "/catalog/gpus")
    expect(phone.locator("#gpu-form-hint")).to_contain_text("Built-in GPU types cannot be changed")
    phone.get_by_role("link", name="Copy h100-sxm-80gb into a new GPU type").click()
    expect(phone.locator("#g-slug")).to_have_value("h100-sxm-80gb-copy")
    expect(phone.get_by_role("link", name="Edit h100-sxm-80gb")).to_have_count(0)


def test_reloading_a_saved_calibration_stores_nothing_again(page: Page, server: str) -> None:
    page.goto(server + "/catalog/clusters")
    page.locator("#c-slug").fill("f5-runs")
    page.select_option("#c-gpu", "h100-sxm-80gb")
    page.get_by_role("button", name="Add the cluster").click()
    page.goto(server + "/calibration")
    page.select_option("#cluster", "f5-runs")
    page.locator("#file").set_input_files(str(EXAMPLE_ROWS))
    page.locator("#save").check()
    page.get_by_role("button", name="Fit and compare").click()
    expect(page).to_have_url(re.compile(r"/calibration/f5-runs/calibrations/\d+$"), timeout=30_000)
    expect(page.locator("#saved-status")).to_contain_text("reloading it stores nothing again")
    runs = server + "/v1/clusters/f5-runs"
    stored = (
        len(_api(runs + "/measurements")["items"]),
        len(_api(runs + "/calibrations")["items"]),
    )
    page.reload()  # F5: a GET of the result page, not the upload posted again
    expect(page.locator("#saved-status")).to_contain_text("Saved as calibration")
    assert _counts(runs) == stored and stored[1] == 1


def test_the_plan_form_refuses_a_number_in_another_script_before_posting(
    page: Page, server: str
) -> None:
    page.goto(server + "/")
    page.locator("#seq_length").fill("٤٠٩٦")
    page.locator("#global_batch_size").fill("1_024")
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#seq_length-error")).to_contain_text(
        "Sequence length must be a whole number (ASCII digits 0-9 only, such as 8)"
    )
    expect(page.locator("#global_batch_size-error")).to_contain_text("you typed '1_024'")
    expect(page.locator("#error-summary")).to_contain_text("2 fields to fix")
    expect(page).to_have_url(server + "/")  # refused in the page: nothing posted


def test_a_table_wider_than_a_phone_is_a_named_tab_stop_that_scrolls(
    phone: Page, server: str, browser: Browser
) -> None:
    phone.goto(server + "/catalog/models")  # eleven columns: wider than 390 px
    wrap = phone.locator(".table-wrap").first
    expect(wrap).to_have_attribute("role", "region")
    expect(wrap).to_have_attribute("aria-label", "Models (scrolls sideways: arrow keys)")
    _tab_to(phone, ".table-wrap")
    phone.keyboard.press("ArrowRight")
    phone.wait_for_function("() => document.querySelector('.table-wrap').scrollLeft > 0")
    wide = browser.new_context(viewport={"width": 1900, "height": 900}).new_page()
    wide.goto(server + "/catalog/gpus")  # fits a wide window: no extra tab stop
    expect(wide.locator(".table-wrap").first).not_to_have_attribute("tabindex", "0")
    wide.context.close()
