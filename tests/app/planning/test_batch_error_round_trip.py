"""A job that failed or fit nothing keeps its input cells in the batch output, so the output read
back as jobs (``planner batch out.csv``, issue 12) fails with the same reason, not with a missing
model."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.batches.rows import rows_for
from app.cli import cli
from tests.app.planning.test_batch_round_trip import write_jobs

pytestmark = pytest.mark.usefixtures("no_server_database")
BAD = {"name": "bad", "model": "mixtral-8x7b", "gpu": "h100-sxm-80gb", "num_gpus": 16,
       "seq_length": 4096, "global_batch_size": 64, "moe_grouped_gemm_kernel": "fast"}  # fmt: skip


def run_batch(jobs: Path, out: Path) -> list[dict[str, str]]:
    """The batch's rows (every job failed: the command exits non-zero, the file is written)."""
    CliRunner().invoke(cli, ["batch", str(jobs), "-o", str(out), "--workers", "1"])
    return list(csv.DictReader(out.open(encoding="utf-8")))


def test_failed_job_reads_back_to_the_same_error(tmp_path: Path) -> None:
    first = run_batch(write_jobs(tmp_path / "jobs.csv", [BAD]), tmp_path / "out.csv")
    (row,) = first
    assert row["error"].startswith("moe_grouped_gemm_kernel:")
    assert row["model"] == "mixtral-8x7b" and row["moe_grouped_gemm_kernel"] == "fast"
    (again,) = run_batch(tmp_path / "out.csv", tmp_path / "again.csv")
    assert again["error"] == row["error"]


def test_error_rows_keep_only_input_columns() -> None:
    """The job's cells as the service stores it (its defaults filled, so a local row and the
    service's are the same: test_local_remote_rows.py); no result column but the error."""
    from app.batches.rows import RESULT_COLUMNS

    request = {"model": {"name": "inline"}, "num_gpus": 16, "top_k": 3, "recompute": "full"}
    (row,) = rows_for("x", "some error", request)
    assert {k: row[k] for k in ("name", "rank", "error", "num_gpus", "recompute")} == {
        "name": "x", "rank": "", "error": "some error", "num_gpus": 16, "recompute": "full"
    }  # fmt: skip
    assert "model" not in row and "top_k" not in row  # an inline object, not an output column
    assert row["precision"] == "bf16"  # a default, as the service's row has it
    assert not set(row) & (set(RESULT_COLUMNS) - {"rank", "error"})


def test_stored_error_keeps_the_request_cells() -> None:
    """The server's batch results (``rows_for_stored``) carry them too."""
    from app.batches.rows import rows_for_stored

    request = {"model": "llama3.1-8b", "num_gpus": 16, "cp_comm_type": "ring"}
    (row,) = rows_for_stored("x", {"error": "cp_comm_type: bad"}, request)
    assert row["cp_comm_type"] == "ring" and row["model"] == "llama3.1-8b"
