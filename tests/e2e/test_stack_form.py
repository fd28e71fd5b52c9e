"""The form's software stack and cluster description (issue 12 items 1-2) in a real Chromium at
1440 px, against the real planner: the values reach the plan (its launch flags) and come back in
the form, and inconsistent network input is flagged under its input."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.test_responsive import artifacts  # noqa: F401 (fixture: PLANNER_TEST_ARTIFACTS)

pytestmark = pytest.mark.e2e

DENSE = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": "16", "seq_length": "4096",
         "global_batch_size": "256"}  # fmt: skip
SELECTS = {"tp_comm_overlap": "off", "attention_backend": "flash", "cross_entropy_fusion": "te",
           "megatron_core_version": "0.17", "te_version": "2.5",  # te: core 0.12-0.18, TE 2.2
           "intra_node_topology": "switch"}  # fmt: skip
TEXTS = {"moe_imbalance": "1", "nics_per_node": "4", "nic_bandwidth_bytes_per_s": "50e9"}


@pytest.fixture()
def laptop(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    yield context.new_page()
    context.close()


def open_advanced(page: Page, url: str) -> None:
    page.goto(url + "/?" + urllib.parse.urlencode(DENSE))
    page.locator("details.advanced summary").click()
    expect(page.locator("#stack-fields")).to_be_visible()


def test_stack_and_cluster_round_trip(
    laptop: Page,
    shared_real_server: str,
    artifacts: Path,  # noqa: F811
) -> None:
    page = laptop
    open_advanced(page, shared_real_server)
    for name, value in SELECTS.items():
        page.locator(f"#{name}").select_option(value)
    for name, value in TEXTS.items():
        page.locator(f"#{name}").fill(value)
    page.screenshot(path=str(artifacts / "stack-form-laptop.png"), full_page=True)
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#plans-table")).to_be_visible(timeout=30_000)
    page.reload()  # the job's page shows the form as it was submitted
    for name, value in SELECTS.items():
        expect(page.locator(f"#{name}")).to_have_value(value)
    expect(page.locator("#nics_per_node")).to_have_value("4")
    expect(page.locator("#moe_imbalance")).to_have_value("1.0")
    page.get_by_role("link", name="Details of plan 1", exact=True).click()
    command = page.locator("#launch-command").inner_text()
    assert "--attention-backend flash" in command and "--cross-entropy-fusion-impl te" in command
    assert "--tp-comm-overlap" not in command
    assert "flags for Megatron-Core 0.17, Transformer Engine 2.5" in page.content()  # the notes
    page.screenshot(path=str(artifacts / "stack-plan-laptop.png"), full_page=True)


def test_nics_without_a_rate_is_flagged_under_the_rate(
    laptop: Page, shared_real_server: str
) -> None:
    page = laptop
    open_advanced(page, shared_real_server)
    page.locator("#nics_per_node").fill("8")
    page.get_by_role("button", name="Find the best layouts").click()
    error = page.locator("#nic_bandwidth_bytes_per_s-error")
    expect(error).to_contain_text("required with NICs per node")
    expect(page.locator("#nic_bandwidth_bytes_per_s")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#nics_per_node")).to_have_value("8")  # what was typed stays
    widths = page.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1]
