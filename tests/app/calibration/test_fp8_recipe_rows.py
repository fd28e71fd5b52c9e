"""A measurement row's ``fp8_recipe`` column (issue 12 item 1: the stack is recorded on every
measurement row): stored and read back as uploaded, parsed onto the row's job, refused on a bf16
row with the field named."""

from __future__ import annotations

from fastapi.testclient import TestClient

from planner.calibration.measurements import parse_rows
from tests.app.calibration.test_api import _csv_text as _csv
from tests.planner.fixtures import H100
from tests.planner.test_stack_settings import ROW as STACK_ROW

URL = "/v1/clusters/dgx-h100/measurements"
ROW = STACK_ROW | {
    "row_id": "R1",
    "source_id": "mine",
    "precision": "fp8",
    "fp8_recipe": "blockwise",
}


def test_the_recipe_column_round_trips_through_the_store(client: TestClient) -> None:
    rows = [ROW, ROW | {"row_id": "R2", "fp8_recipe": ""}]
    r = client.post(URL, content=_csv(rows), headers={"content-type": "text/csv"})
    assert r.status_code == 201, r.text
    listed = client.get(URL).json()["items"]
    assert [m["data"].get("fp8_recipe") for m in listed] == ["blockwise", ""]
    parsed, skipped = parse_rows([m["data"] for m in listed], lambda slug: H100)
    assert not skipped
    # stated: as written; empty: the field's default, resolved with the GPU when priced
    assert [m.job.fp8_recipe for m in parsed] == ["blockwise", None]


def test_a_bf16_row_with_a_recipe_is_refused_naming_the_column(client: TestClient) -> None:
    r = client.post(URL, json=[ROW | {"precision": "bf16"}])
    assert r.status_code == 422
    assert "fp8_recipe='blockwise' applies to fp8 training only" in r.json()["detail"]
    _, skipped = parse_rows([ROW | {"fp8_recipe": "custom"}], lambda slug: H100)
    assert "fp8_recipe" in skipped[0].reason and "tensorwise" in skipped[0].reason
