"""Core attention of sliding-window layers: priced by the pairs a window computes, at the
attention curve's rate for its short key range (catalog-facts §1.6)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models_db import load_gpu
from planner.layouts import LayoutBatch
from planner.model.attention_window import effective_causal_length, window_pair_ratio
from planner.model.flops import flops_per_iteration
from planner.performance.compute import core_attention_time
from planner.performance.context import step_context
from planner.performance.step_time import default_profile, estimate_performance
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import LLAMA_70B

GPU = load_gpu("h100-sxm-80gb")
CLUSTER = ClusterSpec(name="c", gpu=GPU, num_gpus=8)
LAYOUT = Layout(tp=8, dp=1)
EVERY_LAYER = replace(LLAMA_70B, window_size=(127, 0))
ALTERNATING = replace(EVERY_LAYER, window_attn_skip_freq=2)


def core(model: ModelSpec, seq: int) -> float:
    job = TrainingJob(seq_length=seq, global_batch_size=8)
    ctx = step_context(
        model, CLUSTER, job, LayoutBatch.from_layouts([LAYOUT]), default_profile(GPU)
    )
    return float(core_attention_time(ctx)[0])


def test_pairs_follow_min_of_position_and_window() -> None:
    # w = 128 keys: s <= w is a full causal layer, s = 8192 is (8192 w - w^2/2) / (8192^2 / 2)
    assert window_pair_ratio(100.0, 128) == 1.0
    assert window_pair_ratio(128.0, 128) == 1.0
    assert window_pair_ratio(8192.0, 128) == pytest.approx((8192 * 128 - 128**2 / 2) / 8192**2 * 2)
    assert effective_causal_length(8192.0, 128) == pytest.approx(2 * 128 - 128**2 / 8192)


def test_windowed_layer_is_cheaper_at_long_sequences() -> None:
    full, windowed = core(LLAMA_70B, 32768), core(EVERY_LAYER, 32768)
    assert windowed < full / 20  # 128 of ~16k mean keys, at a short-kernel rate
    # alternating layers: the mean of a full and a windowed layer
    assert core(ALTERNATING, 32768) == pytest.approx((full + windowed) / 2)


def test_window_covering_the_sequence_costs_a_full_layer() -> None:
    assert core(EVERY_LAYER, 128) == pytest.approx(core(LLAMA_70B, 128))
    long_window = replace(LLAMA_70B, window_size=(4095, 0))
    assert core(long_window, 4096) == pytest.approx(core(LLAMA_70B, 4096))


def test_model_flops_keep_megatrons_full_causal_count() -> None:
    job = TrainingJob(seq_length=32768, global_batch_size=8)
    batch = LayoutBatch.from_layouts([LAYOUT])
    assert (
        flops_per_iteration(EVERY_LAYER, job, batch)[0]
        == flops_per_iteration(LLAMA_70B, job, batch)[0]
    )


def test_step_time_falls_with_the_window() -> None:
    job = TrainingJob(seq_length=32768, global_batch_size=8)
    batch = LayoutBatch.from_layouts([replace(LAYOUT, recompute="full")])
    full, alt = (
        float(estimate_performance(m, CLUSTER, job, batch, default_profile(GPU)).step_time_s[0])
        for m in (LLAMA_70B, ALTERNATING)
    )
    assert np.isfinite(alt) and alt < 0.9 * full
