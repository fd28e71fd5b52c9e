"""The typed reports (issue 11): built in one place from the planner's results, strict about
their fields, and the same JSON whichever interface prints them."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from app.cli import cli
from app.planning.compute import evaluate_request, plan_request
from app.planning.reports import InverseResult, LayoutReport, PlanResult, plan_answer

JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16, "seq_length": 4096,
       "global_batch_size": 128}  # fmt: skip


def test_evaluation_is_a_typed_report_and_the_cli_prints_its_dump() -> None:
    report = evaluate_request({**JOB, "tp": 2, "pp": 2})
    assert isinstance(report, LayoutReport) and report.valid
    assert report.megatron is not None and "--tensor-model-parallel-size" in report.megatron.args
    assert report.layout.dp == 4 and report.memory.fits
    flags = [part for k, v in JOB.items() for part in (f"--{k.replace('_', '-')}", str(v))]
    out = CliRunner().invoke(cli, ["evaluate", *flags, "--tp", "2", "--pp", "2", "--json"])
    assert json.loads(out.stdout) == report.raw


def test_a_plan_and_its_pareto_front_carry_launch_flags() -> None:
    result = plan_request({**JOB, "pareto": True, "top_k": 2})
    assert isinstance(result, PlanResult) and result.plans and result.pareto
    assert all("torchrun" in p.megatron.command for p in result.plans + result.pareto)
    assert result.search.method == "exhaustive" and result.gpu == "h100-sxm-80gb"


def test_an_undeclared_or_missing_field_is_an_error() -> None:
    doc = evaluate_request({**JOB, "tp": 2}).model_dump(mode="json")
    with pytest.raises(ValidationError, match="surprise"):
        LayoutReport.model_validate({**doc, "surprise": 1})
    with pytest.raises(ValidationError, match=r"memory\.fits"):
        LayoutReport.model_validate({**doc, "memory": {**doc["memory"], "fits": None}})


def test_an_inverse_question_is_its_typed_variant_and_round_trips() -> None:
    answer = plan_request({**JOB, "tp": 8, "maximize": "micro_batch_size", "top_k": 1})
    assert isinstance(answer, InverseResult) and answer.question == "micro_batch_size"
    assert answer.value is not None and answer.value == answer.plans[0].micro_batch_size
    assert answer.plans[0].layout.micro_batch_size == answer.value
    assert answer.search.probes == len(answer.probes) and answer.search.feasible > 0
    assert answer.plans[0].seq_length is None  # only the question's own value is stated
    again = plan_answer(json.loads(json.dumps(answer.raw)))  # as stored and sent
    assert isinstance(again, InverseResult) and again.raw == answer.raw
    plain = plan_request({**JOB, "top_k": 1})
    assert isinstance(plan_answer(plain.raw), PlanResult)
    with pytest.raises(ValidationError):
        plan_answer({**answer.raw, "pareto": []})  # an inverse answer has no Pareto front


def test_the_plan_table_reads_the_typed_answer() -> None:
    flags = [part for k, v in JOB.items() for part in (f"--{k.replace('_', '-')}", str(v))]
    out = CliRunner().invoke(cli, ["plan", *flags, "--tp", "8", "--maximize", "micro-batch-size"])
    assert out.exit_code == 0, out.output
    assert "micro_batch_size reached:" in out.stdout and "values of micro_batch_size tried" in (
        out.stdout
    )
