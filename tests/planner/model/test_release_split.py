"""Memory and speed charge the pipeline split the job's release builds (brief loose9 item 5).

mechanisms-facts §7 and §8: ``--account-for-embedding/loss-in-pipeline-split`` arrived in core
0.11, uneven first/last stages (``--decoder-first/last-pipeline-num-layers``) in 0.9. A 30-layer
model on pp=4 is split 7-8-8-7 with the account-for flags from 0.11, and uneven 8-8-8-6 on core
0.9-0.10, which is what the launch flags of those releases say: the per-rank layer counts that
memory and speed charge must follow the same release (they used the newest split everywhere).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.layouts import LayoutBatch
from planner.megatron.flags import megatron_args
from planner.memory.estimate import estimate_memory
from planner.model.pipeline import stage_layers
from planner.performance.context import step_context
from planner.performance.step_time import default_profile
from planner.space.version_rules import split_lacking
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B

LLAMA_30 = replace(LLAMA_8B, name="llama-30-layers", num_layers=30)
LAYOUT = Layout(tp=1, pp=4, dp=2)
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=8, gpus_per_node=8)


def _job(core: str) -> TrainingJob:
    return TrainingJob(seq_length=4096, global_batch_size=64, megatron_core_version=core)


def _flag(args: list[str], name: str) -> int | None:
    return int(args[args.index(name) + 1]) if name in args else None


def test_core_0_10_charges_the_uneven_split_its_flags_build() -> None:
    batch = LayoutBatch.from_layouts([LAYOUT])
    old, new = _job("0.10"), _job("0.11")
    args = megatron_args(LLAMA_30, CLUSTER, old, LAYOUT)
    first = _flag(args, "--decoder-first-pipeline-num-layers")
    last = _flag(args, "--decoder-last-pipeline-num-layers")
    assert (first, last) == (8, 6) and "--account-for-loss-in-pipeline-split" not in args
    assert "--account-for-loss-in-pipeline-split" in megatron_args(LLAMA_30, CLUSTER, new, LAYOUT)
    charged = stage_layers(LLAMA_30, batch, split_lacking(old))
    assert charged.last.tolist() == [last]  # the last rank's 6, not account-for's 7
    assert stage_layers(LLAMA_30, batch, split_lacking(new)).last.tolist() == [7]


def test_memory_and_speed_of_the_last_rank_follow_the_release() -> None:
    batch = LayoutBatch.from_layouts([LAYOUT])
    profile = default_profile(H100)
    old, new = _job("0.10"), _job("0.11")
    assert step_context(LLAMA_30, CLUSTER, old, batch, profile).last_layers.tolist() == [6]
    assert step_context(LLAMA_30, CLUSTER, new, batch, profile).last_layers.tolist() == [7]
    lighter = estimate_memory(LLAMA_30, CLUSTER, old, batch).last_stage_bytes
    heavier = estimate_memory(LLAMA_30, CLUSTER, new, batch).last_stage_bytes
    assert np.all(lighter < heavier)  # one decoder layer fewer on the loss rank
