"""The one calibrate request (issue 11): JSON rows, CSV text and Megatron-LM logs, with the GPU
and the fit's options, converted once into measurement rows; the CLI, the API and the web page
name the same bad field the way each user typed it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.calibration.request import (
    CalibrateRequest,
    body_field,
    from_body,
    measurement_rows,
    parse,
)
from app.cli import cli
from planner.specs import SpecError

LOGS = Path(__file__).resolve().parents[2] / "planner" / "data" / "megatron_logs"
ROW = {"model_name": "llama3.1-8b", "num_gpus": 8, "tp": 2, "pp": 1, "micro_batch_size": 1,
       "global_batch_size": 64, "seq_length": 4096, "tokens_per_sec_per_gpu": 1200.5,
       "fp8": False}  # fmt: skip
CSV = (  # every column a row needs (planner.calibration.columns)
    "model_name,num_gpus,tp,pp,micro_batch_size,global_batch_size,seq_length,step_time_s,gpu_type\n"
    "x,8,4,1,1,8,4096,1.5,a100-sxm-80gb\n"
)


def test_rows_csv_and_logs_become_text_rows_with_the_request_gpu() -> None:
    log = next(LOGS.glob("*.log"))
    req = parse(
        {
            "rows": [ROW],
            "csv": [{"name": "mine", "text": CSV}],
            "logs": [{"name": log.stem, "text": log.read_text(encoding="utf-8")}],
            "gpu": "h100-sxm-80gb",
            "gpus_per_node": 8,
        }
    )
    found = measurement_rows(req)
    assert found.source == "mixed"
    first, from_csv = found.rows[0], found.rows[1]
    assert first == {"model_name": "llama3.1-8b", "num_gpus": "8", "tp": "2", "pp": "1",
                     "micro_batch_size": "1", "global_batch_size": "64", "seq_length": "4096",
                     "tokens_per_sec_per_gpu": "1200.5", "fp8": "false",
                     "gpu_type": "h100-sxm-80gb", "gpus_per_node": "8"}  # fmt: skip
    assert from_csv["gpu_type"] == "a100-sxm-80gb"  # a row's own GPU wins over the request's
    assert len(found.rows) > 2 and all(r["gpu_type"] == "h100-sxm-80gb" for r in found.rows[2:])


def test_a_csv_without_a_required_column_names_it_and_its_unknown_columns() -> None:
    text = "model_name,tp,gpus\nx,4,8\n"
    req = parse({"csv": [{"name": "mine", "text": text}], "gpu": "h100-sxm-80gb"})
    with pytest.raises(SpecError, match="mine lacks the required columns num_gpus, pp") as exc:
        measurement_rows(req)
    assert exc.value.field == "csv.0" and "its columns gpus are not" in exc.value.message


def test_a_json_row_gets_the_same_column_check_as_a_csv_header() -> None:
    text = "model_name,tp,gpus\nx,4,8\n"
    from_csv = parse({"csv": [{"name": "mine", "text": text}], "gpu": "h100-sxm-80gb"})
    from_json = parse({"rows": [{"model_name": "x", "tp": 4, "gpus": 8}], "gpu": "h100-sxm-80gb"})
    with pytest.raises(SpecError) as csv_err:
        measurement_rows(from_csv)
    with pytest.raises(SpecError) as json_err:
        measurement_rows(from_json)
    assert json_err.value.field == "rows.0"
    said = csv_err.value.message.removeprefix("mine ").replace("the header line", "its keys")
    assert json_err.value.message == f"row 1 {said}"


def test_bad_parts_name_their_field() -> None:
    with pytest.raises(SpecError, match="give measured runs"):
        parse({"gpu": "h100-sxm-80gb"})
    with pytest.raises(SpecError) as exc:
        parse({"rows": [ROW], "group_by": "random"})
    assert exc.value.field == "group_by"
    with pytest.raises(SpecError, match="does not name its GPU") as exc:
        measurement_rows(CalibrateRequest(logs=[{"text": "iteration 1"}]))  # type: ignore[list-item]
    assert exc.value.field == "gpu"
    with pytest.raises(SpecError, match="cells must be") as exc:
        from_body(b'[{"tp": {"nested": 1}}]', "application/json")
    assert exc.value.field == "rows.0"
    assert (body_field("csv.0.3.tp"), body_field("logs.0"), body_field("rows.2")) == (
        "rows.3.tp", "body", "rows.2")  # fmt: skip


def test_the_api_takes_the_whole_request_as_json(client: TestClient) -> None:
    body = {"rows": [ROW], "group_by": "source", "surprise": 1}
    r = client.post("/v1/clusters/dgx-h100/measurements", json=body)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "surprise"


def test_the_cli_names_its_flags(tmp_path: Path) -> None:
    log = next(LOGS.glob("*.log"))
    result = CliRunner().invoke(cli, ["calibrate", "--log", str(log)])
    assert result.exit_code != 0 and "--gpu-type" in result.output
    bad = tmp_path / "bad.csv"
    bad.write_text("tp\n2\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["calibrate", "--measurements", str(bad), "--group-by", "x"])
    assert result.exit_code != 0 and "--group-by" in result.output
