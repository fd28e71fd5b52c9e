"""The plan form's page checks after the QA pass: search axes are whole numbers too."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e


def test_a_fractional_tp_is_flagged_in_the_page_with_the_others(page: Page, server: str) -> None:
    page.goto(server + "/")
    page.locator("details.advanced > summary").click()
    page.locator("#tp").fill("3.5")
    page.locator("#pp").fill("1,2.5")
    page.locator("#seq_length").fill("")
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#tp-error")).to_contain_text("Tensor parallel (TP) must be a whole number")
    expect(page.locator("#pp-error")).to_contain_text("must be whole numbers")
    expect(page.locator("#error-summary")).to_contain_text("3 fields to fix")
    assert not posted, "the page flags the axes before posting"


@pytest.mark.parametrize("per_node", ["-3", "1.5"])
def test_a_bad_node_size_is_one_error_beside_its_own_field(
    page: Page, server: str, per_node: str
) -> None:
    """It also put "8 GPUs do not fill whole nodes of -3" under the GPU count before."""
    page.goto(server + "/")
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    page.locator("#num_gpus").fill("8")
    page.locator("#gpus_per_node").fill(per_node)
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#gpus_per_node-error")).to_contain_text("GPUs per node must be")
    expect(page.locator("#num_gpus-error")).to_have_text("")
    expect(page.locator("#error-summary")).to_contain_text("1 field to fix")
