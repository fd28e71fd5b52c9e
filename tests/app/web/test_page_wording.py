"""Pages speak of the page, not of the API: a model name already in the catalog, an upload with
no rows, and the calibration's keep-or-reject text that agrees with the errors shown."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.app.web.test_web import LLAMA_CONFIG, client, field_block  # noqa: F401  (fixture)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "measurements.csv"


def _calibrate(client: TestClient, name: str, body: bytes) -> str:  # noqa: F811
    response = client.post(
        "/calibration",
        data={"cluster": "dgx-h100"},
        files={"file": (name, body, "text/csv" if name.endswith(".csv") else "text/plain")},
    )
    return response.text


def test_adding_a_model_that_exists_says_to_pick_another_name(client: TestClient) -> None:  # noqa: F811
    data = {"name": "my-tiny-llama", "config_json": json.dumps(LLAMA_CONFIG), "store": "1"}
    assert client.post("/catalog/models", data=data).status_code == 200
    again = client.post("/catalog/models", data=data)
    assert again.status_code == 422
    block = html.unescape(field_block(again.text, "name"))  # under the name input
    assert "'my-tiny-llama' is already in the catalog: pick another name" in block
    assert "PUT /v1" not in again.text


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("runs.csv", b""),
        ("runs.csv", EXAMPLE.read_bytes().splitlines()[0] + b"\n"),
        ("a.json", b"[]"),
    ],
)
def test_an_upload_without_rows_says_the_file_has_none_and_what_a_row_needs(
    client: TestClient,  # noqa: F811
    name: str,
    body: bytes,
) -> None:
    page = _calibrate(client, name, body)
    error = re.search(r'id="file-error"[^>]*>(.*?)</', page, re.S)
    assert error is not None
    assert f"{name} has no measurement rows" in error.group(1)
    assert "tokens_per_sec_per_gpu" in error.group(1)  # what a row needs
    assert "in the request" not in page


def test_the_keep_text_matches_the_errors_shown(client: TestClient) -> None:  # noqa: F811
    text = html.unescape(re.sub(r"\s+", " ", _calibrate(client, "m.csv", EXAMPLE.read_bytes())))
    decision = re.search(r'id="fit-decision"[^>]*>(.*?)</p>', text)
    assert decision is not None
    held = dict(
        re.findall(
            r"(the prior|the cluster's level|coefficient fit) (\d+\.\d) %", decision.group(1)
        )
    )
    prior, level, fit = (
        float(held[k]) for k in ("the prior", "the cluster's level", "coefficient fit")
    )
    # the fit is judged against the level alone; the prior is not on trial, and the text says so
    assert fit <= level
    assert "predicts them at least as well as the level alone" in decision.group(1)
    assert "not compared with the prior" in decision.group(1)
    assert "kept only if they predict held-out rows better" not in text
    shown = re.search(r"<dt>Median before / after</dt><dd>([\d.]+) % / ([\d.]+) %</dd>", text)
    assert shown is not None and float(shown.group(1)) == prior and float(shown.group(2)) == fit
    if fit > prior:  # the case QA met: the page must say why "after" may exceed "before"
        compare = re.search(r'id="cv-compare"[^>]*>(.*?)</p>', text)
        assert compare is not None and "not with the prior" in compare.group(1)
