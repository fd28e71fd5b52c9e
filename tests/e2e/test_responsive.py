"""Every page at a laptop (1440 px) and a phone (390 px) width, against the real planner.

Checks what issue 14 asks of the presentation: no page scrolls sideways, the navigation
collapses on a phone, an unknown URL is an HTML page, a dense model's plan shows no expert
parallelism, cost and days appear with a price and a budget, and the launch command keeps each
flag with its value. Each page's screenshot is written to ``PLANNER_TEST_ARTIFACTS`` (default:
the pytest temporary directory) to be looked at.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.e2e

WIDTHS = {"laptop": (1440, 900), "phone": (390, 844)}
DENSE = {
    "model": "llama3.1-8b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": "16",
    "seq_length": "4096",
    "global_batch_size": "256",
}


@pytest.fixture(scope="module")
def live(shared_real_server: str) -> str:
    """The real planner (a dense 8B plan on 16 GPUs takes about 0.1 s)."""
    return shared_real_server


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("PLANNER_TEST_ARTIFACTS")
    folder = Path(given) if given else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(params=sorted(WIDTHS))
def sized(request: pytest.FixtureRequest, browser: Browser) -> Iterator[tuple[str, Page]]:
    width, height = WIDTHS[request.param]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    yield request.param, page
    context.close()


def shoot(page: Page, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def assert_no_sideways_scroll(page: Page) -> None:
    widths = page.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"page is {widths[0]} px wide in a {widths[1]} px window"


def shoot_and_check_width(page: Page, artifacts: Path, name: str) -> None:
    """Screenshot first, so a page that fails the check can be looked at."""
    shoot(page, artifacts, name)
    assert_no_sideways_scroll(page)


def plan(page: Page, url: str, **extra: str) -> str:
    """Submit the dense job from the form; the URL of the ranked plans."""
    page.goto(url + "/?" + urllib.parse.urlencode(DENSE))
    if extra:
        page.locator("details.advanced summary").click()
        for name, value in extra.items():
            page.locator(f"#{name}").fill(value)
    page.get_by_role("button", name="Find the best layouts").click()
    expect(page.locator("#plans-table")).to_be_visible(timeout=30_000)
    page.wait_for_function("() => !!document.getElementById('scatter-chart')?.chart")
    return page.url


PAGES = (
    ("home", "/"),
    ("models", "/catalog/models"),
    ("gpus", "/catalog/gpus"),
    ("clusters", "/catalog/clusters"),
    ("calibration", "/calibration"),
    ("scaling", "/scaling?" + urllib.parse.urlencode(DENSE | {"num_gpus": "8-64", "run": "1"})),
)


@pytest.mark.parametrize(("name", "path"), PAGES)
def test_page_fits_the_width(
    sized: tuple[str, Page], live: str, artifacts: Path, name: str, path: str
) -> None:
    width, page = sized
    response = page.goto(live + path)
    assert response is not None and response.ok
    if name == "scaling":
        page.wait_for_function("() => !!document.getElementById('scaling-chart')?.chart")
    shoot_and_check_width(page, artifacts, f"{name}-{width}")


def test_results_and_detail_fit_the_width(
    sized: tuple[str, Page], live: str, artifacts: Path
) -> None:
    width, page = sized
    plan(page, live)
    shoot_and_check_width(page, artifacts, f"results-{width}")
    page.get_by_role("link", name="Details of plan 1", exact=True).click()
    page.wait_for_function("() => !!document.getElementById('time-chart')?.chart")
    shoot_and_check_width(page, artifacts, f"detail-{width}")


def test_navigation_collapses_on_a_phone(
    sized: tuple[str, Page], live: str, artifacts: Path
) -> None:
    width, page = sized
    page.goto(live + "/")
    nav = page.locator("#main-nav")
    if width == "laptop":
        expect(nav).to_be_visible()
        expect(page.locator(".nav-toggle-label")).to_be_hidden()
        return
    expect(nav).to_be_hidden()
    page.locator(".nav-toggle-label").click()
    expect(nav).to_be_visible()
    page.screenshot(path=str(artifacts / "menu-open-phone.png"))
    link = nav.get_by_role("link", name="Scaling")
    expect(link).to_be_visible()
    colors = link.evaluate(
        """el => [getComputedStyle(el).color,
                  getComputedStyle(el.closest('header')).backgroundColor]"""
    )
    assert colors[0] != colors[1], f"menu text and header share the colour {colors[0]}"
    link.click()
    expect(page).to_have_url(re.compile(r"/scaling$"))


def test_unknown_url_is_an_html_page(sized: tuple[str, Page], live: str, artifacts: Path) -> None:
    width, page = sized
    response = page.goto(live + "/no/such/page")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    expect(page.locator("#error-page h1")).to_have_text("Not found")
    expect(page.get_by_role("link", name="plan a training run")).to_be_visible()
    assert_no_sideways_scroll(page)
    shoot(page, artifacts, f"404-{width}")


def test_api_errors_stay_problem_json(page: Page, live: str) -> None:
    response = page.goto(live + "/v1/models/no-such-model")
    assert response is not None and response.status == 404
    assert "json" in response.headers["content-type"]


def test_dense_plan_shows_no_expert_parallelism(page: Page, live: str) -> None:
    plan(page, live)
    layouts = page.locator("#plans-table td.layout code").all_inner_texts()
    assert layouts and not any(re.search(r"\bE(T)?P\d", t) for t in layouts), layouts
    page.get_by_role("link", name="Details of plan 1", exact=True).click()
    expect(page.locator("h1")).not_to_contain_text("EP")


def test_cost_and_days_shown_with_price_and_budget(page: Page, live: str) -> None:
    plan(page, live, token_budget="1e11", usd_per_gpu_hour="2.5")
    head = page.locator("#plans-table thead").inner_text()
    assert "Days" in head and "GPU-hours" in head and "Cost" in head
    first = page.locator("#plans-table tbody tr").first
    expect(first).to_contain_text(re.compile(r"\d+\.\d\s*d"))
    expect(first).to_contain_text(re.compile(r"\$[\d,]+"))


def test_no_cost_columns_without_a_budget(page: Page, live: str) -> None:
    plan(page, live)
    assert "Cost" not in page.locator("#plans-table thead").inner_text()


def test_detail_tables_show_values_with_one_precision(page: Page, live: str) -> None:
    plan(page, live)
    page.get_by_role("link", name="Details of plan 1", exact=True).click()
    memory = page.locator("#memory-table tbody").inner_text()
    times = page.locator("#time-table tbody").inner_text()
    assert re.search(r"Weights\s+\d+\.\d\sGiB\s+\d+\s%", memory), memory
    assert re.search(r"Compute\s+\d+\.\d\d\ss\s+\d+\s%", times), times
    assert not re.search(r"\s0\.0\sGiB", memory) and not re.search(r"\s0\.00\ss", times)
    legend = page.evaluate(
        "() => document.getElementById('memory-chart').chart.data.datasets.length"
    )
    assert legend == page.locator("#memory-table tbody tr").count()


def test_launch_command_keeps_each_flag_with_its_value(page: Page, live: str) -> None:
    plan(page, live)
    page.get_by_role("link", name="Details of plan 1", exact=True).click()
    lines = page.locator("#launch-command").inner_text().splitlines()
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert any(re.fullmatch(r"\s*--tensor-model-parallel-size \d+ \\", ln) for ln in lines)
    assert any(re.fullmatch(r"\s*--seq-length 4096 \\", ln) for ln in lines)
    script = page.request.get(page.url + "/launch.sh").text()
    assert 'DATA_PATH="${DATA_PATH:?' in script and '--data-path "$DATA_PATH"' in script


def test_scaling_rows_link_to_a_prefilled_plan(page: Page, live: str) -> None:
    page.goto(live + PAGES[-1][1])
    link = page.locator("#scaling-table tbody tr").first.get_by_role("link")
    link.click()
    expect(page.locator("#num_gpus")).to_have_value("8")
    expect(page.locator("#model")).to_have_value("llama3.1-8b")


def test_favicon_is_served(page: Page, live: str) -> None:
    page.goto(live + "/")
    href = page.locator("link[rel=icon]").get_attribute("href")
    assert href is not None
    response = page.request.get(live + href)
    assert response.ok and response.headers["content-type"].startswith("image/svg+xml")


def test_login_page_is_linked_when_auth_is_on(
    sized: tuple[str, Page], auth_server: str, artifacts: Path
) -> None:
    width, page = sized
    page.goto(auth_server + "/")  # a page that needs a sign-in sends the browser to it
    expect(page).to_have_url(re.compile(r"/login"))
    if width == "phone":
        page.locator(".nav-toggle-label").click()
    expect(page.locator("#main-nav").get_by_role("link", name="Sign in")).to_be_visible()
    expect(page.locator("#login-form")).to_be_visible()
    shoot_and_check_width(page, artifacts, f"login-{width}")


def test_calibration_fit_fits_the_width(
    sized: tuple[str, Page], live: str, artifacts: Path
) -> None:
    csv = Path("/work/shared/data/measured-throughput.csv")
    if not csv.exists():
        pytest.skip("the shared measurements are not on this machine")
    width, page = sized
    page.goto(live + "/calibration")
    page.locator("#cluster").select_option("dgx-h100")
    page.locator("#file").set_input_files(str(csv))
    page.get_by_role("button", name="Fit and compare").click()
    page.wait_for_function("() => !!document.getElementById('calibration-chart')?.chart")
    expect(page.locator("#fit-errors")).to_contain_text("Median error after")
    shoot_and_check_width(page, artifacts, f"calibration-fit-{width}")
