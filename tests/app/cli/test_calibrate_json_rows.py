"""``planner calibrate --measurements rows.json``: the API's JSON rows from a file, with the same
column check as a CSV header (brief loose9 item 4): a one-line message and a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from app.cli import cli
from app.cli.calibrate import read_measurement_rows

ROW = {"model_name": "llama3.1-8b", "num_gpus": 8, "tp": 2, "pp": 1, "micro_batch_size": 1,
       "global_batch_size": 64, "seq_length": 4096, "tokens_per_sec_per_gpu": 9000.0,
       "recompute": "none", "precision": "bf16"}  # fmt: skip


def test_a_json_file_of_rows_is_read_like_the_api_body(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"rows": [ROW]}), encoding="utf-8")  # one line: not a CSV
    (row,) = read_measurement_rows([path], [], "h100-sxm-80gb", 8)
    assert row["tp"] == "2" and row["gpu_type"] == "h100-sxm-80gb"


def test_a_json_row_with_unknown_and_missing_columns_is_named(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([{"model_name": "x", "tp": 4, "gpus": 8}]), encoding="utf-8")
    args = ["calibrate", "--measurements", str(path), "--gpu-type", "h100-sxm-80gb"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    out = result.output
    assert "row 1 lacks the required columns num_gpus, pp" in out
    assert "its columns gpus are not columns of measured-throughput.csv" in out
    assert "--measurements" in out and "Traceback" not in out
