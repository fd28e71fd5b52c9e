"""A measurement row's ``fp8_recipe`` column (issue 12 item 1: the stack is recorded on every
measurement row): stored and read back as uploaded, parsed onto the row's job, refused on a bf16
row with the field named."""

from __future__ import annotations

import csv
import io

from fastapi.testclient import TestClient

from planner.calibration.measurements import parse_rows
from tests.planner.fixtures import H100

URL = "/v1/clusters/dgx-h100/measurements"
ROW = {
    "row_id": "R1", "source_id": "mine", "sweep_id": "s", "model_name": "GPT",
    "num_layers": "24", "hidden_size": "2048", "ffn_hidden_size": "8192",
    "num_attention_heads": "16", "vocab_size": "51200", "seq_length": "2048",
    "gpu_type": "H100", "num_gpus": "8", "gpus_per_node": "8", "tp": "8", "pp": "1",
    "micro_batch_size": "1", "global_batch_size": "8", "precision": "fp8",
    "recompute": "none", "sequence_parallel": "yes", "distributed_optimizer": "no",
    "tokens_per_sec_per_gpu": "1000", "fp8_recipe": "blockwise",
}  # fmt: skip


def _csv(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


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
