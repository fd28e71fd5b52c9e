"""Memory settings and inverse questions in every interface (issue 13): the same fields, bounds
and messages in the API, the CLI flags, ``--input`` lines, batch CSV columns and the SDK, the
same answers from each, and inverse questions that state the value they reached."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.planning.compute import plan_request
from app.planning.schemas import PlanJobCreate
from app.sdk import PlannerClient
from tests.app.planning.interfaces import batch_rows, evaluate_everywhere, flags

pytestmark = pytest.mark.usefixtures("no_server_database")
runner = CliRunner()
JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 8, "seq_length": 4096,
       "global_batch_size": 64}  # fmt: skip
MEMORY = {"grad_reduce_dtype": "bf16", "optimizer_state_dtype": "bf16",
          "recompute_modules": ["core_attn", "mlp"], "optimizer_offload_fraction": 0.5}  # fmt: skip
LAYOUT = {"tp": 2, "micro_batch_size": 2, "recompute": "selective"}


def test_evaluation_memory_settings_agree_in_api_cli_input_and_sdk(
    tmp_path: Path, real_client: TestClient
) -> None:
    request = {**JOB, **LAYOUT, **MEMORY}
    from_api = evaluate_everywhere(real_client, request, tmp_path)
    layout = from_api["layout"]
    assert layout["recompute_modules"] == ["core_attn", "mlp"]
    assert layout["optimizer_offload_fraction"] == 0.5
    command = from_api["megatron"]["command"]
    assert "--grad-reduce-in-bf16" in command and "--optimizer-offload-fraction 0.5" in command
    plain = real_client.post("/v1/evaluations", json={**JOB, **LAYOUT}).json()
    # the settings change the answer: less optimizer memory on the GPU, host memory used
    assert (
        from_api["memory"]["breakdown"]["optimizer_bytes"]
        < plain["memory"]["breakdown"]["optimizer_bytes"]
    )


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("grad_reduce_dtype", "fp16", "fp32"),
        ("optimizer_offload_fraction", 1.5, "1"),
        ("recompute_modules", ["attention"], "core_attn"),
        ("cuda_graphs", "always", "partial"),
        ("activation_offload_layers", -1, "0"),
    ],
)
def test_bad_memory_setting_names_the_field_in_api_and_cli(
    real_client: TestClient, field: str, value: Any, words: str
) -> None:
    request = {**JOB, **LAYOUT, field: value}
    response = real_client.post("/v1/evaluations", json=request)
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert errors[0]["field"].startswith(field) and words in errors[0]["message"]
    result = runner.invoke(cli, ["evaluate", *flags(request)])
    assert result.exit_code != 0
    assert "--" + field.replace("_", "-") in result.output


def test_plan_memory_settings_agree_in_cli_batch_and_service(tmp_path: Path) -> None:
    """The same searched memory settings through CLI flags, a batch CSV row and the request the
    API's plan job runs (app.planning.compute.plan_request) give the same best plans."""
    request = {**JOB, "grad_reduce_dtype": ["fp32", "bf16"], "recompute": ["selective"],
               "recompute_modules": ["core_attn", "mlp"], "optimizer_offload_fraction": [0, 0.5],
               "top_k": 3}  # fmt: skip
    service = json.loads(json.dumps(plan_request(request).raw))  # as the API sends it
    result = runner.invoke(cli, ["plan", *flags(request), "--json"])
    assert result.exit_code == 0, result.output
    from_cli = json.loads(result.stdout)
    rows = batch_rows(request, tmp_path)
    assert len(rows) == 3
    for rank, (a, b, r) in enumerate(zip(service["plans"], from_cli["plans"], rows, strict=True)):
        assert a["layout"] == b["layout"], rank
        assert a["megatron"]["command"] == b["megatron"]["command"] == r["megatron_command"]
        assert r["grad_reduce_dtype"] == a["layout"]["grad_reduce_dtype"]
        assert r["recompute_modules"] == "core_attn,mlp"
        assert float(r["optimizer_offload_fraction"]) == a["layout"]["optimizer_offload_fraction"]
    assert {p["layout"]["recompute_modules"][-1] for p in service["plans"]} == {"mlp"}


def test_maximize_seq_length_states_the_value_in_every_plan() -> None:
    result = runner.invoke(
        cli, ["plan", "--model", "llama3.1-8b", "--gpu", "h100", "--num-gpus", "8",
              "--maximize", "seq-length", "--tp", "8", "--top-k", "2", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["question"] == "seq_length" and answer["value"] % 128 == 0
    assert answer["value"] > 8192
    assert all(p["seq_length"] == answer["value"] for p in answer["plans"])
    assert f"--seq-length {answer['value']}" in answer["plans"][0]["megatron"]["command"]
    # the longest is the longest: one step more fits nowhere
    assert [v for v, n in answer["probes"] if v > answer["value"] and n > 0] == []


def test_largest_micro_batch_and_fewest_gpus() -> None:
    bigger = plan_request({**JOB, "maximize": "micro_batch_size", "tp": 1, "top_k": 1}).raw
    assert (
        bigger["value"] > 1 and bigger["plans"][0]["layout"]["micro_batch_size"] == bigger["value"]
    )
    assert bigger["plans"][0]["micro_batch_size"] == bigger["value"]
    fewest = plan_request(
        {"model": "llama3.1-70b", "gpu": "h100", "num_gpus": 64, "seq_length": 4096,
         "global_batch_size": 64, "minimize": "num_gpus", "top_k": 1}
    ).raw  # fmt: skip
    assert 1 < fewest["value"] <= 64 and fewest["plans"][0]["num_gpus"] == fewest["value"]
    lay = fewest["plans"][0]["layout"]
    assert lay["tp"] * lay["pp"] * lay["cp"] * lay["dp"] == fewest["value"]
    smaller = [n for n, count in fewest["probes"] if n < fewest["value"]]
    assert smaller and all(count == 0 for n, count in fewest["probes"] if n in smaller)


def test_inverse_question_runs_as_a_plan_job(real_client: TestClient) -> None:
    """The API's plan job (the worker) answers it, and the SDK's typed request and result carry
    the question and the value reached."""
    request = PlanJobCreate(model="llama3.1-8b", gpu="h100", num_gpus=8, tp=8,
                            maximize="seq_length", top_k=1)  # fmt: skip
    with PlannerClient("http://testserver", transport=real_client._transport) as sdk:
        job = sdk.submit_plan(request)
        job = sdk.wait_for_job(job["id"], timeout=60)
        assert job["status"] == "succeeded", job
        result = sdk.get_plans(job["id"]).raw
    assert result["question"] == "seq_length" and result["value"] > 8192
    assert result["plans"][0]["seq_length"] == result["value"]


def test_inverse_question_errors_name_the_field(real_client: TestClient) -> None:
    bad = real_client.post("/v1/plan-jobs", json={**JOB, "maximize": "num_gpus"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "maximize"
    result = runner.invoke(cli, ["plan", *flags(JOB), "--maximize", "speed"])
    assert result.exit_code != 0 and "--maximize" in result.output
    both = {**JOB, "maximize": "seq_length", "minimize": "num_gpus"}
    assert real_client.post("/v1/plan-jobs", json=both).status_code == 422
    curve = {**JOB, "num_gpus_options": [8, 16], "maximize": "seq_length"}
    curve.pop("num_gpus")
    bad = real_client.post("/v1/scaling-curves", json=curve)
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "maximize"
    with pytest.raises(Exception, match="seq_length is required"):
        plan_request({k: v for k, v in JOB.items() if k != "seq_length"})


def test_founding_case_says_what_megatron_lacks() -> None:
    """Llama 3.1 70B on two nodes of four V100-32GB: weights and gradients alone exceed the
    memory, and Megatron-LM has no parameter or gradient CPU offload to model: the answer says so
    (and the CLI exits 3, nothing feasible)."""
    result = runner.invoke(
        cli, ["plan", "--model", "llama3.1-70b", "--gpu", "v100-sxm2-32gb", "--num-gpus", "8",
              "--gpus-per-node", "4", "--maximize", "seq-length", "--json"],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    answer = json.loads(result.stdout)
    assert answer["value"] is None and answer["plans"] == []
    (reason,) = answer["rejections"]
    assert "no CPU offload of parameters or gradients" in reason


def test_batch_row_asks_an_inverse_question(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "name,model,gpu,num_gpus,tp,maximize,top_k\nlong,llama3.1-8b,h100,8,8,seq_length,2\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.csv"
    result = runner.invoke(cli, ["batch", str(jobs), "-o", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    direct = plan_request({**JOB, "seq_length": None, "global_batch_size": None, "tp": 8,
                           "maximize": "seq_length", "top_k": 2}).raw  # fmt: skip
    assert [int(r["seq_length_reached"]) for r in rows] == [direct["value"]] * 2
    assert rows[0]["micro_batch_size_reached"] == "" and rows[0]["error"] == ""
