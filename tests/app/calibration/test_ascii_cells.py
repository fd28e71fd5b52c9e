"""A measurement upload (JSON rows, a CSV file, ``planner calibrate --measurements``) reads its
number cells only as plain ASCII decimal: '1_0', '٨' and 'inf' are a 422 (a CLI message and a
non-zero exit) naming the row, the column and the accepted form, and nothing is stored."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "measurements.csv"
URL = "/v1/clusters/dgx-h100/measurements"


def _row(**changes: Any) -> dict[str, Any]:
    with EXAMPLE.open(newline="", encoding="utf-8") as handle:
        return {**next(csv.DictReader(handle)), **changes}


def _csv(*rows: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


CASES = [
    ("tp", "1_0", "tp='1_0' is not a whole number: send one such as 8 in ASCII digits 0-9"),
    ("tp", "٨", "tp='٨' is not a whole number: send one such as 8 in ASCII digits 0-9"),
    ("global_batch_size", "inf", "global_batch_size='inf' is not a whole number"),
    ("tokens_per_sec_per_gpu", "10_682.4",
     "tokens_per_sec_per_gpu='10_682.4' is not a number: send one such as 0.8 in ASCII digits"),
    ("tokens_per_sec_per_gpu", "٨", "tokens_per_sec_per_gpu='٨' is not a number"),
    ("tokens_per_sec_per_gpu", "inf", "tokens_per_sec_per_gpu='inf' is not a finite number"),
    ("moe_imbalance", "nan", "moe_imbalance='nan' is not a finite number: send a decimal >= 1.0"),
]  # fmt: skip


@pytest.mark.parametrize(("column", "text", "said"), CASES)
def test_a_json_row_names_the_row_the_column_and_the_form(
    client: TestClient, column: str, text: str, said: str
) -> None:
    r = client.post(URL, json=[_row(), _row(row_id="r7", **{column: text})])
    assert r.status_code == 422, r.text  # refused, though the other row is good
    assert r.json()["errors"][0]["field"] == f"rows.1.{column}"
    assert f"r7: {said}" in r.json()["errors"][0]["message"]
    assert client.get(URL).json()["items"] == []  # nothing of the bad upload is stored


@pytest.mark.parametrize(("column", "text", "said"), CASES)
def test_a_csv_row_names_the_row_the_column_and_the_form(
    client: TestClient, column: str, text: str, said: str
) -> None:
    body = _csv(_row(moe_imbalance=""), _row(row_id="r3", **{column: text}))
    r = client.post(URL, content=body.encode(), headers={"content-type": "text/csv"})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == f"rows.1.{column}"
    assert f"r3: {said}" in r.json()["errors"][0]["message"]
    assert client.get(URL).json()["items"] == []


def test_a_row_without_an_id_is_named_by_its_position(client: TestClient) -> None:
    bad = {k: v for k, v in _row(tp="1_0").items() if k != "row_id"}
    r = client.post(URL, json=[bad])
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert error["field"] == "rows.0.tp"
    assert error["message"].startswith("row 1: tp='1_0' is not a whole number")


def test_plain_numbers_and_json_numbers_are_stored(client: TestClient) -> None:
    r = client.post(URL, json=[_row(tp=1, tokens_per_sec_per_gpu=10682.4), _row(tp="1.0")])
    assert r.status_code == 201, r.text
    assert r.json()["added"] == 2


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_planner_calibrate_says_the_row_and_the_column(tmp_path: Path, suffix: str) -> None:
    bad = _row(row_id="r5", tp="٨")
    path = tmp_path / f"runs{suffix}"
    text = _csv(bad) if suffix == ".csv" else json.dumps([bad], ensure_ascii=False)
    path.write_text(text, encoding="utf-8")
    args = ["calibrate", "--measurements", str(path), "--gpu-type", "h100-sxm-80gb"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    out = " ".join(result.output.split())  # Rich wraps long lines
    assert "r5: tp='٨' is not a whole number" in out and "ASCII digits" in out
    assert "Traceback" not in out
