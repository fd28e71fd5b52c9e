"""A judge's walk through the other pages' forms (web9): an error the server found takes the
focus to its field, as the plan form's do, so a keyboard or screen-reader user lands on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e


def test_a_calibration_upload_without_a_file_focuses_the_file_field(
    page: Page, server: str
) -> None:
    page.goto(server + "/calibration")
    page.get_by_role("button", name="Fit and compare").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#file-error")).to_contain_text("choose a CSV, JSON or Megatron-LM log")
    expect(page.locator("#file")).to_be_focused()


def test_a_bad_log_focuses_the_file_field_with_the_reason(
    page: Page, server: str, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    log.write_text("hello\nnot a training log\n")
    page.goto(server + "/calibration")
    page.locator("#file").set_input_files(str(log))
    page.get_by_role("button", name="Fit and compare").click()
    expect(page.locator("#file-error")).to_contain_text("not a Megatron-LM log")
    expect(page.locator("#file")).to_be_focused()
    expect(page.locator("#file")).to_have_attribute("aria-describedby", "file-error")


def test_bad_suggest_json_focuses_its_textarea(page: Page, server: str) -> None:
    page.goto(server + "/calibration")
    page.locator("#suggest_request").fill("{nope")
    page.get_by_role("button", name="Suggest runs").click()
    expect(page.locator("#suggest_request-error")).to_contain_text("not JSON")
    expect(page.locator("#suggest_request")).to_be_focused()


def test_a_refused_batch_focuses_the_jobs_field(page: Page, server: str) -> None:
    page.goto(server + "/batches")
    page.get_by_role("button", name="Plan the batch").click()
    expect(page.locator("#jobs-error")).to_contain_text("choose a jobs file")
    expect(page.locator("#jobs_file")).to_be_focused()


def test_a_bad_config_json_focuses_its_textarea(page: Page, server: str) -> None:
    page.goto(server + "/catalog/models")
    page.locator("#config_json").fill("{")
    page.get_by_role("button", name="Parse only").click()
    expect(page.locator("#config_json-error")).to_contain_text("not valid JSON")
    expect(page.locator("#config_json")).to_be_focused()


def test_a_page_without_errors_keeps_the_focus_at_the_top(page: Page, server: str) -> None:
    page.goto(server + "/calibration")
    assert page.evaluate("() => document.activeElement === document.body")
