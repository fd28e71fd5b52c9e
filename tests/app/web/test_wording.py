"""The web pages' words for API errors and calibration numbers (QA leftovers 5 and 7)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.web import wording
from tests.app.web.test_web import client  # noqa: F401 (fixture)

LABELS = {"inter_node_bandwidth_bytes_per_s": "Or: network per GPU (bytes/s)", "tp": "TP"}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "inter_node_bandwidth_bytes_per_s: Input should be greater than or equal to "
            "0.000000001",
            "Or: network per GPU (bytes/s) must be more than 0.",
        ),
        (
            "inter_node_bandwidth_bytes_per_s: Input should be less than or equal to "
            "1000000000000000",
            "Or: network per GPU (bytes/s) must be at most 10^15.",
        ),
        ("tp: Input should be less than or equal to 1024", "TP must be at most 1,024."),
        ("tp: Input should be a valid integer, got a number", "TP must be a whole number."),
    ],
)
def test_pydantic_phrases_become_the_labels_words(message: str, expected: str) -> None:
    field = message.split(":", 1)[0]
    assert wording.plain(message, field, LABELS) == expected


def test_other_messages_keep_their_words_with_labels_for_names() -> None:
    text = wording.plain(
        "tp=3 must divide heads; see inter_node_bandwidth_bytes_per_s", "tp", LABELS
    )
    assert text == "tp=3 must divide heads; see Or: network per GPU (bytes/s)"


def test_coefficients_have_four_significant_digits_and_zero_is_zero() -> None:
    assert wording.coefficient(7.629e-16) == "0"
    assert wording.coefficient(0.0) == "0"
    assert wording.coefficient(0.123456) == "0.1235"
    assert wording.coefficient(1.0) == "1.000"
    assert wording.coefficient(12345.678) == "12,346"
    assert wording.coefficient(3.2e-7) == "3.2e-07"


def test_plural_counts() -> None:
    assert wording.plural(1, "measured run") == "1 measured run"
    assert wording.plural(3, "measured run") == "3 measured runs"


SHARED = Path("/work/shared/data/measured-throughput.csv")


def _h100_rows(n: int) -> bytes:
    table = csv.DictReader(io.StringIO(SHARED.read_text()))
    rows = [r for r in table if r["gpu_type"] == "H100" and r["ffn_hidden_size"]]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows[:n])
    return out.getvalue().encode()


@pytest.mark.skipif(not SHARED.exists(), reason="the shared measurements are not here")
def test_calibration_page_says_one_run_and_the_decision(client: TestClient) -> None:  # noqa: F811
    response = client.post(
        "/calibration",
        data={"cluster": "dgx-h100"},
        files={"file": ("runs.csv", _h100_rows(1), "text/csv")},
    )
    assert response.status_code == 200, response.text[-500:]
    assert "Fit on 1 measured run of" in response.text
    decision = re.search(r'id="fit-decision"[^>]*>(.*?)</p>', response.text, re.S)
    assert decision and "the fit is kept" in decision.group(1)
    cells = re.findall(r'<td class="num">([^<]*)</td>', response.text)
    assert cells and not any(re.search(r"\de-1\d", c) for c in cells)


def test_an_advanced_field_error_on_the_plan_form_is_in_plain_words(client: TestClient) -> None:  # noqa: F811
    from tests.app.web.test_web import FORM, field_block

    response = client.post("/plans", data=FORM | {"inter_node_bandwidth_bytes_per_s": "0"})
    assert response.status_code == 422
    block = field_block(response.text, "inter_node_bandwidth_bytes_per_s")
    assert "Or: network per GPU (bytes/s) must be more than 0." in block
    assert "Input should" not in response.text and "0.000000001" not in response.text


def test_an_unknown_cluster_points_at_the_cluster_menu(client: TestClient) -> None:  # noqa: F811
    from tests.app.web.test_web import FORM, field_block

    response = client.post("/plans", data=FORM | {"cluster": "dgx-h10"})
    assert response.status_code == 422
    block = field_block(response.text, "cluster")
    assert "did you mean dgx-h100" in block and "the Cluster menu lists them" in block
    assert "/v1/" not in block
