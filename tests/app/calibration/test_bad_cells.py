"""A measurement row with a bad cell names the row and the column, and says what to send."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "measurements.csv"
URL = "/v1/clusters/dgx-h100/measurements"


def _row(**changes: Any) -> dict[str, Any]:
    with EXAMPLE.open(newline="", encoding="utf-8") as handle:
        return {**next(csv.DictReader(handle)), **changes}


def test_a_json_true_for_tp_names_the_row_and_the_column(client: TestClient) -> None:
    r = client.post(URL, json=[_row(), _row(row_id="r9", tp=True)])
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert error["field"] == "rows.1.tp"
    assert "row 'r9'" in error["message"] and "whole number" in error["message"]
    assert "could not convert" not in r.text
    assert client.get(URL).json()["items"] == []  # nothing of the bad upload is stored


def test_a_json_false_for_a_speed_asks_for_a_number(client: TestClient) -> None:
    r = client.post(URL, json=[_row(tokens_per_sec_per_gpu=False)])
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "rows.0.tokens_per_sec_per_gpu"
    assert "a number such as" in r.json()["errors"][0]["message"]


@pytest.mark.parametrize(
    ("cell", "said"),
    [
        ({"tp": "eight"}, "tp='eight' is not a whole number: send one such as 8"),
        ({"moe_imbalance": "high"}, "moe_imbalance='high' is not a number: send a decimal >= 1.0"),
    ],
)
def test_a_word_for_a_number_names_the_row_and_the_column(
    client: TestClient, cell: dict[str, str], said: str
) -> None:
    r = client.post(URL, json=[_row(row_id="r7", **cell)])
    assert r.status_code == 422, r.text
    message = r.json()["errors"][0]["message"]
    assert f"r7: {said}" in message
    assert "could not convert" not in message
    assert client.get(URL).json()["items"] == []


def test_a_fraction_for_a_whole_number_is_not_truncated(client: TestClient) -> None:
    r = client.post(URL, json=[_row(row_id="r5", micro_batch_size="1.5")])
    assert r.status_code == 422, r.text
    assert "micro_batch_size='1.5' is not a whole number" in r.json()["errors"][0]["message"]


def test_a_word_for_a_speed_in_a_csv_names_the_column(client: TestClient) -> None:
    row = _row(row_id="r3", tokens_per_sec_per_gpu="fast")
    text = ",".join(row) + "\n" + ",".join(str(v) for v in row.values()) + "\n"
    r = client.post(URL, content=text, headers={"content-type": "text/csv"})
    assert r.status_code == 422, r.text
    message = r.json()["errors"][0]["message"]
    assert "r3: tokens_per_sec_per_gpu='fast' is not a number: send one such as 0.8" in message


def test_whole_numbers_written_with_a_point_are_still_accepted(client: TestClient) -> None:
    r = client.post(URL, json=[_row(tp="1.0", num_gpus=8)])
    assert r.status_code == 201, r.text


def test_a_word_for_moe_imbalance_in_a_csv_names_the_column(client: TestClient) -> None:
    row = _row(row_id="r4", moe_imbalance="1,3")
    text = ",".join(row) + "\n" + ",".join(f'"{v}"' for v in row.values()) + "\n"
    r = client.post(URL, content=text, headers={"content-type": "text/csv"})
    assert r.status_code == 422, r.text
    assert "r4: moe_imbalance='1,3' is not a number: send a decimal >= 1.0" in r.text


def test_a_json_true_for_moe_imbalance_asks_for_a_decimal_from_one(client: TestClient) -> None:
    r = client.post(URL, json=[_row(moe_imbalance=True)])
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert error["field"] == "rows.0.moe_imbalance"
    assert "a decimal >= 1.0" in error["message"]


def test_a_moe_imbalance_below_one_is_refused_naming_the_range(client: TestClient) -> None:
    r = client.post(URL, json=[_row(row_id="r2", moe_imbalance="0.5")])
    assert r.status_code == 422, r.text
    assert "r2: moe_imbalance=0.5 must be in [1, 8]" in r.json()["errors"][0]["message"]
