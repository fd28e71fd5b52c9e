"""Sliding-window attention with context parallelism: only ``all_gather`` is stated to support
windows (mechanisms-facts §1.3), so other CP types are refused and the search picks it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models_db import load_gpu, load_model
from planner.layouts import LayoutBatch
from planner.search.cp_choice import choose_cp_comm
from planner.space.rules import violations
from planner.specs import CP_COMM_TYPES, ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import LLAMA_70B

GPU = load_gpu("h100-sxm-80gb")
CLUSTER = ClusterSpec(name="c", gpu=GPU, num_gpus=64, gpus_per_node=8)
JOB = TrainingJob(seq_length=65536, global_batch_size=64)
WINDOWED = replace(LLAMA_70B, window_size=(4095, 0), window_attn_skip_freq=2)


@pytest.mark.parametrize("kind", ["p2p", None, "a2a"])
def test_windowed_model_with_cp_refuses_other_types(kind: str | None) -> None:
    msgs = violations(WINDOWED, CLUSTER, JOB, Layout(tp=2, cp=4, dp=8, cp_comm_type=kind))
    hits = [m for m in msgs if "sliding-window attention" in m]
    assert len(hits) == 1
    assert "only cp_comm_type 'all_gather' supports sliding windows" in hits[0]
    assert "set cp_comm_type='all_gather' or cp=1" in hits[0]


def test_windowed_model_with_all_gather_or_no_cp_passes_the_rule() -> None:
    for lay in (Layout(tp=2, cp=4, dp=8, cp_comm_type="all_gather"), Layout(tp=8, dp=8)):
        assert not any("sliding-window" in m for m in violations(WINDOWED, CLUSTER, JOB, lay))


def test_full_attention_model_keeps_p2p() -> None:
    lay = Layout(tp=2, cp=4, dp=8, cp_comm_type="p2p")
    assert not any("sliding-window" in m for m in violations(LLAMA_70B, CLUSTER, JOB, lay))


def test_search_gives_windowed_open_layouts_all_gather() -> None:
    batch = LayoutBatch.from_layouts([Layout(tp=2, cp=4, dp=8), Layout(tp=8, cp=2, dp=4)])
    chosen = choose_cp_comm(WINDOWED, CLUSTER, JOB, batch)
    assert np.all(chosen.cp_comm_codes == CP_COMM_TYPES.index("all_gather"))


def test_gpt_oss_with_cp_is_planned_with_all_gather() -> None:
    model = load_model("gpt-oss-120b")
    job = TrainingJob(seq_length=32768, global_batch_size=64)
    batch = LayoutBatch.from_layouts([Layout(tp=1, cp=8, ep=8, dp=8)])
    chosen = choose_cp_comm(model, CLUSTER, job, batch)
    assert CP_COMM_TYPES[int(chosen.cp_comm_codes[0])] == "all_gather"
