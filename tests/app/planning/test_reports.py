"""The typed reports (issue 11): built in one place from the planner's results, strict about
their fields, and the same JSON whichever interface prints them."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from app.cli import cli
from app.planning.compute import evaluate_request, plan_request
from app.planning.reports import LayoutReport, PlanResult

JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16, "seq_length": 4096,
       "global_batch_size": 128}  # fmt: skip


def test_evaluation_is_a_typed_report_and_the_cli_prints_its_dump() -> None:
    report = evaluate_request({**JOB, "tp": 2, "pp": 2})
    assert isinstance(report, LayoutReport) and report.valid
    assert report.megatron is not None and "--tensor-model-parallel-size" in report.megatron.args
    assert report.layout.dp == 4 and report.memory.fits
    flags = [part for k, v in JOB.items() for part in (f"--{k.replace('_', '-')}", str(v))]
    out = CliRunner().invoke(cli, ["evaluate", *flags, "--tp", "2", "--pp", "2", "--json"])
    assert json.loads(out.stdout) == report.model_dump(mode="json")


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
