"""A judge's walk after web11: a first-time user compares two searches that differ in one
setting, a phone and screen-reader user waits for a slow search, and the server fails under
the form (an error answer, no answer, a progress check that fails, a search that is gone)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.e2e.conftest import start_server

pytestmark = pytest.mark.e2e

PLAN_URL = re.compile(r"/plans/[0-9a-f-]{36}$")


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The canned planner, each search taking about 3 s (ten steps of 0.3 s)."""
    proc, url = start_server(tmp_path_factory.mktemp("slow-db"), env={"PLANNER_FAKE_STEP_S": "0.3"})
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture()
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    yield context.new_page()
    context.close()


def _problem(status: int, title: str, detail: str) -> dict[str, object]:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return {"status": status, "content_type": "application/problem+json", "body": json.dumps(body)}


def test_two_searches_that_differ_in_one_setting_can_be_told_apart(page: Page, server: str) -> None:
    """Both said 'llama3.1-8b on 64 × h100-sxm-80gb' under the same title 'Parallel Planner'."""
    page.goto(server + "/")
    page.locator("#model").select_option("llama3.1-8b")
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page).to_have_url(PLAN_URL)
    expect(page.locator("#job")).to_have_attribute("data-status", "succeeded")
    first = page.url
    expect(page.locator("#job-asked")).to_contain_text("sequence 4,096 tokens")
    expect(page).to_have_title(re.compile(r"^Plans: llama3\.1-8b on .*sequence 4,096 tokens"))
    page.locator("#seq_length").fill("32768")
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page).not_to_have_url(first)
    expect(page.locator("#job")).to_have_attribute("data-status", "succeeded")
    expect(page.locator("#job-asked")).to_contain_text("sequence 32,768 tokens")
    expect(page).to_have_title(re.compile(r"^Plans: llama3\.1-8b on .*sequence 32,768 tokens"))
    compared = page.locator("#recent-searches tbody tr")
    expect(compared.first).to_contain_text("sequence 32,768 tokens")
    expect(compared.first).to_contain_text("(this one)")
    expect(compared.nth(1).get_by_role("link")).to_contain_text("sequence 4,096 tokens")
    page.go_back()
    expect(page).to_have_url(first)
    expect(page.locator("#job-asked")).to_contain_text("sequence 4,096 tokens")
    expect(page).to_have_title(re.compile("sequence 4,096 tokens"))
    page.locator("#plans-table a", has_text="Details").first.click()
    expect(page).to_have_title(re.compile(r"^Plan 1: TP\d.* · llama3\.1-8b on .*4,096 tokens"))


def test_a_slow_search_at_phone_width_takes_the_focus_and_says_how_it_ended(
    phone: Page, slow_server: str, tmp_path: Path
) -> None:
    """The results came in below the long form, out of sight, and nothing was read out."""
    page = phone
    page.goto(slow_server + "/")
    page.locator("#seq_length").focus()
    page.keyboard.press("Enter")
    heading = page.locator("#job-title")
    expect(heading).to_have_text("Searching…")
    expect(heading).to_be_focused()
    expect(heading).to_be_in_viewport()
    expect(page.locator("#job progress")).to_be_visible()
    expect(page.locator("#job [role=status]")).to_contain_text("layouts evaluated", timeout=5000)
    expect(page).to_have_title(re.compile(r"^Searching: "))
    page.screenshot(path=str(tmp_path / "slow-search-390.png"))
    expect(page.locator("#job")).to_have_attribute("data-status", "succeeded", timeout=15000)
    expect(heading).to_contain_text("Ranked plans")
    expect(heading).to_be_focused()  # the swap kept the user where they were
    expect(page.locator("#results-live")).to_have_text(
        re.compile(r"^Search finished: \d+ plans? shown; the best is TP\d.* tokens/s per GPU\.$")
    )
    expect(page).to_have_title(re.compile(r"^Plans: "))
    widths = page.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1]


def test_an_error_answer_to_plan_is_said_beside_the_button_and_the_form_is_kept(
    page: Page, server: str
) -> None:
    page.goto(server + "/")
    page.locator("#seq_length").fill("32768")
    problem = _problem(500, "Internal server error", "An unexpected error occurred.")
    page.route("**/plans", lambda route: route.fulfill(**problem))  # type: ignore[arg-type]
    page.get_by_role("button", name="Find the best layouts").click()
    error = page.locator("#submit-error")
    expect(error).to_be_visible()
    expect(error).to_have_attribute("role", "alert")
    expect(error).to_contain_text("HTTP 500 Internal server error: An unexpected error occurred.")
    expect(error).to_contain_text("Your form is kept as you left it")
    expect(page.locator("#seq_length")).to_have_value("32768")
    expect(page).to_have_url(server + "/")
    page.unroute("**/plans")
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page).to_have_url(PLAN_URL)
    expect(page.locator("#submit-error")).to_be_hidden()
    expect(page.locator("#job-asked")).to_contain_text("sequence 32,768 tokens")


def test_no_answer_to_plan_says_the_server_did_not_answer(page: Page, server: str) -> None:
    page.goto(server + "/")
    page.route("**/plans", lambda route: route.abort("connectionrefused"))
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#submit-error")).to_contain_text("The server did not answer")
    expect(page.get_by_role("button", name="Find the best layouts")).to_be_enabled()


def test_failing_progress_checks_are_said_and_the_results_still_come(
    page: Page, slow_server: str
) -> None:
    problem = _problem(503, "Service unavailable", "The database is not reachable.")

    def status(route: Route) -> None:
        route.fulfill(**problem)  # type: ignore[arg-type]

    page.route(re.compile(r"/plans/[0-9a-f-]{36}/status$"), status)
    page.goto(slow_server + "/")
    page.get_by_role("button", name="Find the best layouts").click()
    note = page.locator("#poll-error")
    expect(note).to_contain_text("HTTP 503 Service unavailable: The database is not reachable.")
    expect(note).to_contain_text("still trying")
    page.unroute(re.compile(r"/plans/[0-9a-f-]{36}/status$"))
    expect(page.locator("#job")).to_have_attribute("data-status", "succeeded", timeout=15000)
    expect(page.locator("#poll-error")).to_have_count(0)


def test_a_search_gone_from_the_server_stops_the_polling_and_says_what_to_do(
    page: Page, slow_server: str
) -> None:
    checks: list[str] = []
    problem = _problem(404, "Not found", "no plan 'x'; it may have been made before a restart")

    def gone(route: Route) -> None:
        checks.append(route.request.url)
        route.fulfill(**problem)  # type: ignore[arg-type]

    page.route(re.compile(r"/plans/[0-9a-f-]{36}/status$"), gone)
    page.goto(slow_server + "/")
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#poll-error")).to_contain_text("no longer on the server")
    expect(page.locator("#poll-error")).to_contain_text("plan it again")
    asked = len(checks)
    time.sleep(1.5)  # three poll intervals
    assert len(checks) == asked


CONFIG = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32768,
    "max_position_embeddings": 32768,
}


def test_a_config_json_on_disk_is_loaded_and_planned(page: Page, server: str) -> None:
    """The form took pasted text only; a user with the file had to open it elsewhere."""
    page.goto(server + "/")
    expect(page.locator("#model_source_catalog")).to_be_checked()
    page.get_by_label("or load the model's config.json from a file").set_input_files(
        files=[
            {
                "name": "config.json",
                "mimeType": "application/json",
                "buffer": json.dumps(CONFIG).encode(),
            }
        ]
    )
    expect(page.locator("#hf_config_file-status")).to_have_text(
        re.compile(r"^Loaded config\.json \(\d+ bytes\) into config\.json above\.$")
    )
    expect(page.locator("#hf_config")).to_have_value(re.compile('"model_type": "mistral"'))
    expect(page.locator("#model_source_hf")).to_be_checked()
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#job-asked")).to_contain_text("mistral on ")


def test_a_pasted_config_is_planned_without_ticking_its_source(page: Page, server: str) -> None:
    """Pasting left 'From the catalog' ticked: the catalog's model was planned, silently."""
    page.goto(server + "/")
    page.locator("#hf_config").fill(json.dumps(CONFIG))
    expect(page.locator("#model_source_hf")).to_be_checked()
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#job-asked")).to_contain_text("mistral on ")
    page.locator("#model").select_option("llama3.1-8b")  # the select takes the choice back
    expect(page.locator("#model_source_catalog")).to_be_checked()


def test_a_batch_whose_progress_checks_fail_says_so_and_catches_up(
    page: Page, slow_server: str
) -> None:
    jobs = (
        "name,model,gpu,num_gpus,gpus_per_node,seq_length,global_batch_size,precision\n"
        + "".join(f"j{i},llama3.1-8b,h100-sxm-80gb,16,8,{1024 << i},128,bf16\n" for i in range(3))
    )
    status = re.compile(r"/batches/[0-9a-f-]{36}/status$")
    problem = _problem(503, "Service unavailable", "The database is not reachable.")
    page.route(status, lambda route: route.fulfill(**problem))  # type: ignore[arg-type]
    page.goto(slow_server + "/batches")
    page.get_by_label("Jobs file").set_input_files(
        files=[{"name": "jobs.csv", "mimeType": "text/csv", "buffer": jobs.encode()}]
    )
    page.get_by_role("button", name="Plan the batch").click()
    note = page.locator("#batch-poll-error")
    expect(note).to_contain_text("HTTP 503 Service unavailable", timeout=10_000)
    expect(note).to_contain_text("still trying")
    page.unroute(status)
    expect(page.locator("#batch")).to_have_attribute("data-status", "finished", timeout=60_000)
    expect(note).to_have_count(0)
