"""Leave-one-stack-out holds out one software stack: the Megatron-Core and Transformer Engine
releases and the fp8 recipe are part of it (issue 12, the stack fold)."""

from __future__ import annotations

from dataclasses import replace

from planner.calibration.fit import group_key
from planner.calibration.suggest import unmeasured_row
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_70B

CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
ROW = unmeasured_row(
    LLAMA_70B,
    CLUSTER,
    TrainingJob(seq_length=8192, global_batch_size=128, precision="fp8"),
    Layout(tp=4, pp=4, vpp=5, dp=4),
)


def key(**job: object) -> str:
    return group_key(replace(ROW, job=replace(ROW.job, **job)), "stack")


def test_core_and_te_releases_are_different_stacks() -> None:
    assert key(megatron_core_version="0.8") != key(megatron_core_version="0.12")
    assert key(te_version="1.8") != key(te_version="2.5")
    assert key(megatron_core_version="0.8") != key()  # stated vs not stated


def test_the_fp8_recipe_is_part_of_the_stack() -> None:
    assert key(fp8_recipe="delayed") != key(fp8_recipe="tensorwise")


def test_rows_of_one_stack_share_a_group() -> None:
    assert key(megatron_core_version="0.8", te_version="1.8") == key(
        megatron_core_version="0.8", te_version="1.8"
    )
    assert "core=0.8 te=1.8" in key(megatron_core_version="0.8", te_version="1.8")
