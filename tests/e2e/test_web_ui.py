"""The web UI in a real Chromium: submit, see ranked plans, open one, copy, charts, errors."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e


def fill_form(page: Page, **values: str) -> None:
    for name, value in values.items():
        locator = page.locator(f"#{name}")
        if locator.evaluate("el => el.tagName") == "SELECT":
            locator.select_option(value)
        else:
            locator.fill(value)


def plan_and_wait(page: Page, server: str) -> None:
    page.goto(server + "/")
    fill_form(page, model="mixtral-8x22b", gpu="h100-sxm-80gb", num_gpus="256")
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#plans-table")).to_be_visible(timeout=15_000)


def chart_drawn(page: Page, canvas_id: str) -> bool:
    return bool(
        page.evaluate(
            f"""() => {{ const c = document.getElementById('{canvas_id}');
        return !!c && !!c.chart && c.width > 0 && c.height > 0; }}"""
        )
    )


def test_submit_shows_ranked_plans_in_place(page: Page, server: str) -> None:
    plan_and_wait(page, server)
    rows = page.locator("#plans-table tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("TP8 PP4 VPP2 DP2 mbs1")
    assert re.search(r"/plans/[0-9a-f-]{36}$", page.url)  # htmx pushed the result URL


def test_results_scatter_is_drawn(page: Page, server: str) -> None:
    plan_and_wait(page, server)
    page.wait_for_function("() => !!document.getElementById('scatter-chart').chart")
    assert chart_drawn(page, "scatter-chart")


def test_plan_detail_draws_memory_and_time_charts(page: Page, server: str) -> None:
    plan_and_wait(page, server)
    page.get_by_role("link", name="Details of plan 1").click()
    expect(page.get_by_role("heading", name=re.compile("Plan 1"))).to_be_visible()
    page.wait_for_function("() => !!document.getElementById('time-chart').chart")
    assert chart_drawn(page, "memory-chart")
    assert chart_drawn(page, "time-chart")


def test_copy_button_puts_the_command_on_the_clipboard(page: Page, server: str) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    plan_and_wait(page, server)
    page.get_by_role("link", name="Details of plan 1").click()
    page.get_by_role("button", name="Copy command").click()
    expect(page.locator("#copy-status")).to_have_text(re.compile("Copied|Selected"))
    command = page.locator("#launch-command").inner_text()
    if "Copied" in page.locator("#copy-status").inner_text():
        assert page.evaluate("() => navigator.clipboard.readText()") == command
    assert command.startswith("torchrun ")


def test_bad_seq_length_shows_error_next_to_the_field(page: Page, server: str) -> None:
    page.goto(server + "/")
    fill_form(page, seq_length="0")
    page.get_by_role("button", name="Find the best layouts").click()
    error = page.locator("#seq_length-error")
    expect(error).to_have_text("Sequence length must be between 1 and 1,048,576.")  # plain words
    expect(page.locator("#seq_length")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#seq_length")).to_have_value("0")


def test_bad_pasted_config_shows_error_under_the_textarea(page: Page, server: str) -> None:
    page.goto(server + "/")
    page.get_by_label("Paste a Hugging Face config.json").check()
    page.locator("#hf_config").fill('{"hidden_size": ')
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#hf_config-error")).to_contain_text("not valid JSON")


def test_keyboard_reaches_the_submit_button(page: Page, server: str) -> None:
    page.goto(server + "/")
    page.locator("#model").focus()
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.type") == "submit":
            break
    else:
        raise AssertionError("Tab never reached the submit button")
    page.keyboard.press("Enter")
    expect(page.locator("#plans-table")).to_be_visible(timeout=15_000)


@pytest.mark.slow
def test_mixtral_on_256_h100_shows_results_within_5_s(page: Page, real_server: str) -> None:
    page.goto(real_server + "/")
    fill_form(
        page,
        model="mixtral-8x22b",
        gpu="h100-sxm-80gb",
        num_gpus="256",
        gpus_per_node="8",
        seq_length="4096",
        global_batch_size="1024",
    )
    start = time.perf_counter()
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#plans-table, #job .form-error").first).to_be_visible(timeout=60_000)
    page.wait_for_function(
        "() => !!document.getElementById('scatter-chart')?.chart", timeout=10_000
    )
    elapsed = time.perf_counter() - start
    print(f"\nMixtral-8x22B on 256 x H100: ranked table and chart after {elapsed:.2f} s")
    expect(page.locator("#plans-table tbody tr").first).to_be_visible()
    assert elapsed < 15.0  # target 5 s; generous for a loaded 2-core CI machine


def test_calibration_chart_is_drawn(page: Page, server: str) -> None:
    csv = Path("/work/shared/data/measured-throughput.csv")
    if not csv.exists():
        pytest.skip("the shared measurements are not on this machine")
    page.goto(server + "/calibration")
    page.locator("#cluster").select_option("dgx-h100")
    page.locator("#file").set_input_files(str(csv))
    page.get_by_role("button", name="Fit and compare").click()
    page.wait_for_function("() => !!document.getElementById('calibration-chart')?.chart")
    assert chart_drawn(page, "calibration-chart")
    expect(page.locator("#fit-errors")).to_contain_text("Median error after")


def test_pages_run_under_the_csp_and_the_scaling_chart_is_drawn(page: Page, server: str) -> None:
    refused: list[str] = []
    page.on(
        "console",
        lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.goto(
        server + "/scaling?model=llama3.1-70b&gpu=h100-sxm-80gb&num_gpus=64-128"
        "&seq_length=8192&global_batch_size=1024&run=1"
    )
    page.wait_for_function(  # scaling.js, a static file since the CSP forbids inline script
        "() => typeof Chart !== 'undefined'"
        " && !!Chart.getChart(document.getElementById('scaling-chart'))",
        timeout=15_000,
    )
    for path in ("/", "/catalog/models", "/calibration", "/docs", "/redoc"):
        page.goto(server + path)
        page.wait_for_load_state("networkidle")
    # ReDoc's footer logo comes from its CDN: the policy blocking it is the point (no CDN)
    assert [m for m in refused if "https://cdn.redoc.ly/" not in m] == []
