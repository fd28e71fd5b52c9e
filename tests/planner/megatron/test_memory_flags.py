"""Launch flags of the memory settings, and the parser reading them back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planner.megatron import megatron_args, parse_megatron_args
from planner.space import comm_flags as overlap
from planner.specs import Layout, TrainingJob
from tests.planner.fixtures import LLAMA_8B as LLAMA8B
from tests.planner.fixtures import MIXTRAL_8X7B as MIXTRAL
from tests.planner.space.test_memory_rules import MLA, hosted
from tests.planner.space.test_rules import dense

JOB = TrainingJob(seq_length=4096, global_batch_size=64)
FP8 = TrainingJob(seq_length=4096, global_batch_size=64, precision="fp8")
FP16 = TrainingJob(seq_length=4096, global_batch_size=64, precision="fp16")
BASE = Layout(tp=2, dp=4)

CASES: list[tuple[Any, TrainingJob, Layout, list[str]]] = [
    (LLAMA8B, JOB, replace(BASE, grad_reduce_dtype="bf16"), ["--grad-reduce-in-bf16"]),
    (LLAMA8B, JOB, replace(BASE, optimizer_state_dtype="bf16"),
     ["--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype"]),
    (LLAMA8B, JOB, replace(BASE, optimizer_offload_fraction=0.5),
     ["--optimizer-cpu-offload", "--optimizer-offload-fraction", "0.5",
      "--use-precision-aware-optimizer"]),
    (LLAMA8B, JOB, replace(BASE, activation_offload_layers=4),
     ["--cpu-offloading-num-layers", "4"]),
    (LLAMA8B, JOB, replace(BASE, recompute="selective", recompute_modules=("core_attn", "mlp")),
     ["--recompute-granularity", "selective", "--recompute-modules", "core_attn", "mlp"]),
    (dense(**MLA), JOB,
     replace(BASE, recompute="selective", recompute_modules=("mla_up_proj", "layernorm")),
     ["--recompute-modules", "layernorm", "mla_up_proj"]),
    (LLAMA8B, JOB, replace(BASE, recompute="full", recompute_num_layers=3),
     ["--recompute-method", "block", "--recompute-num-layers", "3"]),
    (LLAMA8B, JOB, replace(BASE, cuda_graphs="partial"),
     ["--cuda-graph-impl", "transformer_engine"]),
    (MIXTRAL, JOB, Layout(tp=2, ep=4, dp=4, cuda_graphs="partial"),
     ["--cuda-graph-modules", "attn", "moe_router", "moe_preprocess"]),
    (LLAMA8B, JOB, replace(BASE, cuda_graphs="full_iteration"),
     ["--cuda-graph-impl", "full_iteration", "--no-check-for-nan-in-loss-and-grad"]),
    (LLAMA8B, FP8, replace(BASE, fp8_param_gather=False), []),
    (LLAMA8B, FP16, BASE, ["--fp16"]),
    (LLAMA8B, JOB, Layout(pp=4, vpp=2, dp=2, pipeline_layout="Etttt|(tttt|)*6ttttL"),
     ["--pipeline-model-parallel-layout", "Etttt|(tttt|)*6ttttL"]),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_flags_are_emitted_and_parse_back(case: tuple[Any, ...]) -> None:
    model, job, layout, expected = case
    c = hosted(8)
    args = megatron_args(model, c, job, layout)
    joined = " ".join(args)
    assert " ".join(expected) in joined or all(flag in args for flag in expected)
    parsed = parse_megatron_args(args, world_size=layout.num_gpus)
    assert parsed.layout == overlap.resolve(model, c, layout, tp_overlap_on=job.tp_comm_overlap)
    assert parsed.precision == job.precision


def test_a_layout_string_replaces_the_other_pipeline_flags() -> None:
    layout = Layout(pp=4, vpp=2, dp=2, pipeline_layout="Etttt|(tttt|)*6ttttL")
    args = megatron_args(LLAMA8B, hosted(8), JOB, layout)
    assert "--num-virtual-stages-per-pipeline-rank" not in args  # megatron-facts rule 7
    assert "--bf16" in args and "--fp16" not in args


def test_fp8_param_gather_off_is_not_emitted_and_on_is() -> None:
    off = megatron_args(LLAMA8B, hosted(8), FP8, replace(BASE, fp8_param_gather=False))
    auto = megatron_args(LLAMA8B, hosted(8), FP8, BASE)
    assert "--fp8-param-gather" not in off and "--fp8-param-gather" in auto
