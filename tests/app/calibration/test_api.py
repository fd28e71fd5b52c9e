"""Measurements (JSON, CSV, Megatron log) and calibrations of a cluster preset."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

SHARED_CSV = Path(__file__).resolve().parents[4] / "shared" / "data" / "measured-throughput.csv"
LOGS = Path(__file__).resolve().parents[2] / "planner" / "data" / "megatron_logs"


def _h100_rows(limit_sweeps: int = 2) -> list[dict[str, str]]:
    if not SHARED_CSV.exists():
        pytest.skip("shared/data/measured-throughput.csv is not beside the checkout")
    with SHARED_CSV.open(newline="", encoding="utf-8") as handle:
        rows = [
            r
            for r in csv.DictReader(handle)
            if "H100" in r["gpu_type"]
            and r["reliability"] == "high"
            and r["sweep_id"]
            and r["hidden_size"]
            and (r["tokens_per_sec_per_gpu"] or r["step_time_s"])
        ]
    counts = {s: sum(r["sweep_id"] == s for r in rows) for s in {r["sweep_id"] for r in rows}}
    sweeps = sorted(s for s, n in counts.items() if n >= 3)[:limit_sweeps]
    return [r for r in rows if r["sweep_id"] in sweeps]


def _csv_text(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def test_csv_upload_stores_every_row(client: TestClient) -> None:
    rows = _h100_rows()
    r = client.post(
        "/v1/clusters/dgx-h100/measurements",
        content=_csv_text(rows),
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    assert (r.json()["added"], r.json()["total"]) == (len(rows), len(rows))
    listed = client.get("/v1/clusters/dgx-h100/measurements").json()["items"]
    assert [m["data"]["row_id"] for m in listed] == [row["row_id"] for row in rows]


def test_json_rows_upload(client: TestClient) -> None:
    rows = _h100_rows()[:3]
    r = client.post("/v1/clusters/dgx-h100/measurements", json=rows)
    assert (r.status_code, r.json()["added"]) == (201, 3)


def test_megatron_log_upload(client: TestClient) -> None:
    logs = sorted(LOGS.glob("*.log")) if LOGS.exists() else []
    if not logs:
        pytest.skip("no Megatron-LM log fixtures")
    r = client.post(
        "/v1/clusters/dgx-h100/measurements",
        content=logs[0].read_bytes(),
        headers={"content-type": "text/plain"},
    )
    assert r.status_code in (201, 422), r.text
    if r.status_code == 201:
        item = client.get("/v1/clusters/dgx-h100/measurements").json()["items"][0]
        assert item["source"] == "log"


def test_garbage_log_is_422(client: TestClient) -> None:
    r = client.post(
        "/v1/clusters/dgx-h100/measurements",
        content=b"hello world",
        headers={"content-type": "text/plain"},
    )
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] in ("body", "rows")


def test_rows_without_a_measurement_are_422(client: TestClient) -> None:
    r = client.post("/v1/clusters/dgx-h100/measurements", json=[{"model_name": "x"}])
    assert r.status_code == 422
    # the row's position, not '?', without a row_id; the columns it lacks, as a CSV's header
    assert "row 1 lacks the required columns num_gpus, tp, pp" in r.json()["detail"]
    assert r.json()["errors"][0]["field"] == "rows.0"


def test_json_rows_get_the_csv_column_check(client: TestClient) -> None:
    """Brief loose9 item 4: unknown and missing columns of a JSON row are named like a CSV's
    header (one check, planner.calibration.columns), on the row's field."""
    row = {
        "model_name": "llama3.1-8b",
        "num_gpus": 8,
        "tp": 2,
        "pp": 1,
        "micro_batch_size": 1,
        "global_batch_size": 64,
        "seq_length": 4096,
        "tokens_per_sec_per_gpu": 9000.0,
        "recompute": "none",
        "precision": "bf16",
    }
    bad = {k: v for k, v in row.items() if k != "pp"} | {"row_id": "run-7", "gpus": 8}
    r = client.post("/v1/clusters/dgx-h100/measurements", json=[row, bad])
    assert r.status_code == 422
    (error,) = r.json()["errors"]
    assert error["field"] == "rows.1"
    assert "row 'run-7' lacks the required columns pp" in error["message"]
    assert "its columns gpus are not columns of measured-throughput.csv" in error["message"]
    assert "its keys must use" in error["message"]
    assert client.get("/v1/clusters/dgx-h100/measurements").json()["items"] == []  # none stored
    assert client.post("/v1/clusters/dgx-h100/measurements", json=[row]).status_code == 201


def test_unsupported_media_type_is_415(client: TestClient) -> None:
    r = client.post(
        "/v1/clusters/dgx-h100/measurements",
        content=b"<xml/>",
        headers={"content-type": "application/xml"},
    )
    assert r.status_code == 415


def test_unknown_cluster_is_404(client: TestClient) -> None:
    assert client.post("/v1/clusters/nowhere/measurements", json=[{"a": 1}]).status_code == 404
    assert client.get("/v1/clusters/nowhere/calibrations").status_code == 404


def test_calibration_without_measurements_is_409(client: TestClient) -> None:
    r = client.post("/v1/clusters/dgx-h100/calibrations")
    assert r.status_code == 409
    assert "measurements" in r.json()["detail"]


def test_calibration_fits_a_profile_and_reports_cv_error(client: TestClient) -> None:
    rows = _h100_rows()
    client.post("/v1/clusters/dgx-h100/measurements", json=rows)
    r = client.post("/v1/clusters/dgx-h100/calibrations")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["num_measurements"] == len(rows)
    assert body["profile"]["gpu"] == "h100-sxm-80gb"
    cv = body["report"]["cross_validation"]
    assert cv["median_ape_before"] is not None and cv["median_ape_after"] is not None
    listed = client.get("/v1/clusters/dgx-h100/calibrations").json()["items"]
    assert [c["id"] for c in listed] == [body["id"]]
