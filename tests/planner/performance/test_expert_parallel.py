"""Physics of round 2: grouped expert GEMMs, overlap interference, FP8 casts."""

from __future__ import annotations

import numpy as np

from planner.layouts import LayoutBatch
from planner.model.shapes import Gemm
from planner.performance.compute import elementwise_bytes_per_token
from planner.performance.expert_parallel import grouped_expert_time, weight_bound_efficiency
from planner.performance.step_time import PerformanceProfile, estimate_performance
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B

FC1 = Gemm(fwd_flop_per_token=2 * 7168 * 4096 * 8, n=4096, k=7168, shard="n")
ONE = np.array([1.0])


def _expert_time(local_experts: float, per_expert: float) -> float:
    tokens = np.array([per_expert * local_experts / 8])  # 8 = top-k copies per token
    return float(
        grouped_expert_time(
            (FC1,), tokens, ONE, np.array([per_expert]), np.array([local_experts]), H100,
            plateau=0.71, half_time_s=18e-6, fp8=False, hbm_bytes_per_s=0.8 * 3.35e12,
        )[0]
    )  # fmt: skip


def test_grouped_gemm_is_sized_by_all_local_experts() -> None:
    # 32 experts x 256 tokens in one call run faster per FLOP than one expert's 256 tokens
    rate_one = 1 / _expert_time(1, 256)
    rate_grouped = 32 / _expert_time(32, 256)
    assert rate_grouped > 1.5 * rate_one


def test_weight_bound_efficiency_matches_measured_small_m_gemms() -> None:
    # performance-facts §1.4 H100 bf16 (4096, 7168): 283 / 490 / 712 TFLOP/s at m = 128/256/512
    knee = 0.71 * 989.4e12 * 2 / (2 * 0.8 * 3.35e12)
    model = 0.71 * weight_bound_efficiency(np.array([128.0, 256.0, 512.0]), knee) * 989.4
    measured = np.array([283.0, 490.0, 712.0])
    assert np.all(np.abs(model / measured - 1) < 0.15)


def _fsdp_vs_distopt(interference: float) -> tuple[float, float]:
    prof = PerformanceProfile(gpu="h100", overlap_interference=interference)
    layouts = [
        Layout(tp=2, pp=1, dp=4, micro_batch_size=1, optimizer_sharding=s)
        for s in ("optimizer", "full")
    ]
    est = estimate_performance(
        LLAMA_8B,
        ClusterSpec(name="c", gpu=H100, num_gpus=8, gpus_per_node=8),
        TrainingJob(seq_length=8192, global_batch_size=64),
        LayoutBatch.from_layouts(layouts),
        prof,
    )
    return float(est.step_time_s[0]), float(est.step_time_s[1])


def test_fsdp_is_slower_than_distributed_optimizer_when_its_gathers_hide() -> None:
    dist, fsdp = _fsdp_vs_distopt(0.15)
    assert fsdp > dist * 1.005
    free_dist, free_fsdp = _fsdp_vs_distopt(0.0)
    assert abs(free_fsdp - free_dist) < 0.002 * free_dist  # without it they tie (round 1)


def test_fp8_casts_count_output_gradients_and_every_routed_copy() -> None:
    tp, sp = np.array([1]), np.array([0.0])
    bf16 = elementwise_bytes_per_token(LLAMA_8B, tp, sp, False)[0][0]
    fp8 = elementwise_bytes_per_token(LLAMA_8B, tp, sp, True)[0][0]
    h, f, q, kv = 4096, 14336, 4096, 2 * 8 * 128
    inputs = h + q + h + f  # QKV, proj, FC1, FC2 inputs
    outputs = (q + kv) + h + 2 * f + h  # their outputs (FC1 2F with SwiGLU)
    assert fp8 - bf16 == 2.0 * (inputs + outputs)
