"""Keyboard users after a failed submit (QA round 8): errors only the server finds move the
focus to the first of them, as the page's own checks do."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e


def test_a_server_found_error_takes_the_focus_to_its_field(page: Page, server: str) -> None:
    page.goto(server + "/")
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    page.locator("#recompute_num_layers").fill("0")  # no page check: the schema's ge=1
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = false)")
    page.locator("#seq_length").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#recompute_num_layers-error")).to_contain_text("at least 1")
    expect(page.locator("#error-summary")).to_contain_text("see the message beside it")
    expect(page.locator("#recompute_num_layers")).to_be_focused()
    expect(page.locator("#recompute_num_layers")).to_be_visible()


def test_a_second_click_after_the_results_came_is_the_same_plan_job(
    page: Page, server: str
) -> None:
    """The button is disabled while the post is in flight, but the answer comes fast: the
    second click of a slow double click (or an impatient re-click) hits the returned form."""
    before = page.request.get(server + "/v1/plan-jobs?limit=1").json()["total"]
    page.goto(server + "/")
    button = page.get_by_role("button", name="Find the best layouts")
    button.click()
    expect(page).to_have_url(re.compile(r"/plans/[0-9a-f-]{36}$"))
    first = page.url
    button.click()
    page.wait_for_load_state("networkidle")
    assert page.url == first
    after = page.request.get(server + "/v1/plan-jobs?limit=1").json()["total"]
    assert after - before == 1


def test_the_hidden_menu_toggle_is_no_tab_stop_on_a_wide_screen(page: Page, server: str) -> None:
    """The menu's checkbox (invisible, its label hidden) took a Tab press at 1366 px."""
    page.goto(server + "/")
    stops = []
    for _ in range(4):
        page.keyboard.press("Tab")
        stops.append(
            page.evaluate("document.activeElement.id || document.activeElement.textContent.trim()")
        )
    assert "nav-toggle" not in stops and "Plan" in stops


def test_the_menu_toggle_opens_from_the_keyboard_on_a_phone(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server + "/")
    page.locator("#nav-toggle").focus()
    page.keyboard.press("Space")
    expect(page.get_by_role("link", name="Calibration")).to_be_visible()


def test_back_after_a_submit_shows_the_form_as_it_was_sent(page: Page, server: str) -> None:
    """htmx's history snapshot is markup: the typed values were lost, "back" showed 64 GPUs."""
    page.goto(server + "/")
    page.locator("#num_gpus").fill("16")
    page.locator("#seq_length").fill("2048")
    page.locator("#precision").select_option("fp8")
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page).to_have_url(re.compile(r"/plans/[0-9a-f-]{36}$"))
    page.go_back()
    expect(page).to_have_url(server + "/")
    expect(page.locator("#num_gpus")).to_have_value("16")
    expect(page.locator("#seq_length")).to_have_value("2048")
    expect(page.locator("#precision")).to_have_value("fp8")
