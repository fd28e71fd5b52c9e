"""What a user copies from a plan says the stack it was priced with (brief review9): the attention
backend of a core < 0.11 job reaches the launch script and the copyable command as Transformer
Engine's variables (not only the env list), and an fp8 job that names no recipe says which one
it runs (run.fp8_recipe, the notes, the flags, a batch row), and that recipe reads back."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from app.planning.compute import plan_request
from app.planning.reports import PlanResult, RankedPlan
from app.web.launch import launch_command, launch_script
from planner.megatron.args import parse_megatron_args
from tests.app.planning.interfaces import batch_rows

pytestmark = pytest.mark.usefixtures("no_server_database")
JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 8, "seq_length": 4096,
       "global_batch_size": 64, "top_k": 1, "max_trials": 60}  # fmt: skip


def best(request: dict[str, Any]) -> RankedPlan:
    answer = plan_request(request)
    assert isinstance(answer, PlanResult) and answer.plans, answer
    return answer.plans[0]


def test_an_old_cores_attention_backend_is_in_the_script_and_the_command() -> None:
    plan = best({**JOB, "attention_backend": "flash", "megatron_core_version": "0.10"})
    script, command = launch_script(plan), launch_command(plan)
    assert "export NVTE_FLASH_ATTN=1" in script and "export NVTE_FUSED_ATTN=0" in script
    assert "NVTE_FLASH_ATTN=1" in command and "NVTE_FUSED_ATTN=0" in command
    assert "--attention-backend" not in command
    tokens = shlex.split(plan.megatron.command)
    env = dict(t.split("=", 1) for t in tokens[: tokens.index("torchrun")])
    parsed = parse_megatron_args(plan.megatron.args, world_size=8, env=env)
    assert parsed.stack_fields["attention_backend"] == "flash"


@pytest.mark.parametrize(("core", "recipe"), [(None, "tensorwise"), ("0.11", "delayed")])
def test_an_unset_fp8_recipe_is_named_wherever_the_plan_is_read(
    core: str | None, recipe: str, tmp_path: Path
) -> None:
    request = {**JOB, "precision": "fp8", **({"megatron_core_version": core} if core else {})}
    plan = best(request)
    assert plan.run is not None and plan.run.fp8_recipe == recipe
    assert any(f"priced with {recipe}" in n for n in plan.megatron.notes)
    assert f"priced with {recipe}" in launch_script(plan)  # as a '# Note:' line
    parsed = parse_megatron_args(plan.megatron.args, world_size=8)
    assert parsed.stack_fields["fp8_recipe"] == recipe  # the flags launch what was priced
    (row,) = batch_rows(request, tmp_path)
    assert row["fp8_recipe"] == recipe and row["error"] == ""
