"""Batch output rows carry the run they were planned for (issue 12): the model, the cluster
description and the software stack, in columns named as the input fields, so an output file read
back as jobs plans the same layouts to the same numbers (``planner batch out.csv``)."""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.batches.rows import OUTPUT_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS, STACK_COLUMNS
from app.cli import cli

pytestmark = pytest.mark.usefixtures("no_server_database")
runner = CliRunner()
PRESET = {"name": "preset", "model": "llama3.1-8b", "cluster": "dgx-h100", "num_gpus": 16,
          "seq_length": 32768, "global_batch_size": 16, "top_k": 2, "max_trials": 200}  # fmt: skip
DESCRIBED = {"name": "nics", "model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16,
             "seq_length": 4096, "global_batch_size": 64, "top_k": 2, "max_trials": 200,
             "nics_per_node": 2, "nic_bandwidth_bytes_per_s": 50e9, "tp_comm_overlap": False,
             "attention_backend": "flash", "moe_imbalance": 1.0}  # fmt: skip
COMPARED = ("tokens_per_s_per_gpu", "step_time_s", "memory_total_gib", "megatron_command")


def write_jobs(path: Path, jobs: list[dict[str, Any]]) -> Path:
    fields = list(dict.fromkeys(k for job in jobs for k in job))
    cells = [{k: str(v).lower() if isinstance(v, bool) else v for k, v in j.items()} for j in jobs]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(cells)
    return path


def run_batch(jobs: Path, out: Path) -> list[dict[str, str]]:
    result = runner.invoke(cli, ["batch", str(jobs), "-o", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(out.open(encoding="utf-8")))


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, str]], Path]:
    folder = tmp_path_factory.mktemp("round-trip")
    jobs = write_jobs(folder / "jobs.csv", [PRESET, DESCRIBED])
    return run_batch(jobs, folder / "out.csv"), folder


def test_rows_carry_the_resolved_cluster_and_stack(
    planned: tuple[list[dict[str, str]], Path],
) -> None:
    rows, _ = planned
    assert set(RUN_COLUMNS) | set(STACK_COLUMNS) <= set(OUTPUT_COLUMNS)
    preset = next(r for r in rows if r["name"] == "preset")
    # the preset's description (models_db dgx-h100: 8 x 400 Gb/s NICs, NVSwitch) filled in
    assert {k: preset[k] for k in ("cluster", "gpu", "gpus_per_node", "nics_per_node",
                                   "intra_node_topology", "tp_comm_overlap")} == {
        "cluster": "dgx-h100", "gpu": "h100-sxm-80gb", "gpus_per_node": "8", "nics_per_node": "8",
        "intra_node_topology": "switch", "tp_comm_overlap": "True",
    }  # fmt: skip
    assert float(preset["nic_bandwidth_bytes_per_s"]) == 50e9
    assert float(preset["inter_node_bandwidth_bytes_per_s"]) == 50e9
    assert preset["cp_comm_type"] in ("p2p", "all_gather", "a2a", "a2a+p2p")  # cp > 1: chosen
    described = next(r for r in rows if r["name"] == "nics")
    assert described["cluster"] == "" and described["nics_per_node"] == "2"
    # 2 NICs x 50 GB/s over 8 GPUs: 12.5 GB/s per GPU, the number the planner used
    assert float(described["inter_node_bandwidth_bytes_per_s"]) == 12.5e9
    stack = {k: described[k] for k in ("tp_comm_overlap", "attention_backend", "moe_imbalance")}
    assert stack == {"tp_comm_overlap": "False", "attention_backend": "flash",
                     "moe_imbalance": "1.0"}  # fmt: skip


def test_an_output_read_back_plans_the_same_layouts_to_the_same_numbers(
    planned: tuple[list[dict[str, str]], Path],
) -> None:
    rows, folder = planned
    again = run_batch(folder / "out.csv", folder / "again.csv")
    assert len(again) == len(rows)  # every row is one job with its layout fixed
    for first, second in zip(rows, again, strict=True):
        assert second["rank"] == "1" and second["error"] == ""
        inputs = [c for c in OUTPUT_COLUMNS if c not in RESULT_COLUMNS]
        assert {c: second[c] for c in inputs} == {c: first[c] for c in inputs}
        assert {c: second[c] for c in COMPARED} == {c: first[c] for c in COMPARED}


def test_the_service_rows_carry_the_same_run_columns(
    planned: tuple[list[dict[str, str]], Path], real_client: TestClient
) -> None:
    rows, _ = planned
    jobs = [PRESET, DESCRIBED]
    batch_id = real_client.post("/v1/batches", json={"jobs": jobs}).json()["id"]
    deadline = time.monotonic() + 120
    while real_client.get(f"/v1/batches/{batch_id}").json()["status"] != "finished":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    served = real_client.get(f"/v1/batches/{batch_id}/results?format=csv").text
    table = list(csv.DictReader(served.splitlines()))
    columns = (*RUN_COLUMNS, *STACK_COLUMNS)
    assert [{c: r[c] for c in columns} for r in table] == [{c: r[c] for c in columns} for r in rows]
