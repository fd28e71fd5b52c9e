"""Physics sanity of the throughput model (planner.performance.step_time)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.layouts import LayoutBatch
from planner.model.flops import flops_per_iteration
from planner.performance.data_parallel import exposed_dp_comm
from planner.performance.step_time import (
    BREAKDOWN_KEYS,
    PerformanceProfile,
    default_profile,
    estimate_performance,
)
from planner.performance.straggler import expected_max_normal
from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, SpecError, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, LLAMA_70B, MIXTRAL_8X7B
from tests.support.vectorised import assert_calls_do_not_grow

A100 = GPUSpec(
    name="a100-sxm4-80gb",
    hbm_bytes=80 * 2**30,
    hbm_bandwidth_bytes_per_s=2.039e12,
    peak_bf16_flop_per_s=312e12,
    peak_fp8_flop_per_s=None,
    intra_node_bandwidth_bytes_per_s=300e9,
    architecture="ampere",
)


def cluster(gpus: int = 64, per_node: int = 8, gpu: GPUSpec = H100) -> ClusterSpec:
    return ClusterSpec(name="c", gpu=gpu, num_gpus=gpus, gpus_per_node=per_node)


def estimate(
    model: ModelSpec,
    layouts: list[Layout],
    *,
    gpus: int = 64,
    per_node: int = 8,
    gbs: int = 128,
    seq: int = 8192,
    precision: str = "bf16",
    gpu: GPUSpec = H100,
):
    job = TrainingJob(seq_length=seq, global_batch_size=gbs, precision=precision)  # type: ignore[arg-type]
    return estimate_performance(
        model,
        cluster(gpus, per_node, gpu),
        job,
        LayoutBatch.from_layouts(layouts),
        default_profile(gpu),
    )


def test_tp_across_nodes_is_slower_than_inside_a_node() -> None:
    layout = [Layout(tp=8, pp=1, dp=8)]
    inside = estimate(LLAMA_70B, layout, per_node=8)
    across = estimate(LLAMA_70B, layout, per_node=4)
    assert across.breakdown["tp_comm_s"][0] > 2 * inside.breakdown["tp_comm_s"][0]
    assert across.step_time_s[0] > inside.step_time_s[0]


def test_bubble_share_shrinks_with_more_microbatches() -> None:
    layout = [Layout(tp=4, pp=4, dp=4)]
    few = estimate(LLAMA_70B, layout, gbs=16)
    many = estimate(LLAMA_70B, layout, gbs=256)
    share = lambda e: e.breakdown["bubble_s"][0] / e.step_time_s[0]  # noqa: E731
    assert share(many) < share(few) / 4


def test_interleaving_shrinks_the_bubble() -> None:
    est = estimate(LLAMA_70B, [Layout(tp=4, pp=4, vpp=1, dp=4), Layout(tp=4, pp=4, vpp=5, dp=4)])
    assert est.breakdown["bubble_s"][1] < est.breakdown["bubble_s"][0] / 3


def test_fp8_is_faster_than_bf16_for_large_gemms_on_h100() -> None:
    big = ModelSpec(
        name="big",
        num_layers=16,
        hidden_size=16384,
        ffn_hidden_size=53248,
        num_attention_heads=128,
        num_query_groups=8,
        vocab_size=128256,
    )
    layout = [Layout(tp=4, pp=1, dp=16)]
    bf16 = estimate(big, layout, precision="bf16")
    fp8 = estimate(big, layout, precision="fp8")
    assert fp8.step_time_s[0] < 0.8 * bf16.step_time_s[0]
    assert fp8.step_time_s[0] > 0.5 * bf16.step_time_s[0]  # fp8 is not a free 2x


def test_mfu_is_a_fraction_for_many_layouts() -> None:
    rng = np.random.default_rng(0)
    n = 500
    batch = LayoutBatch.from_columns(
        tp=rng.choice([1, 2, 4, 8], n),
        pp=rng.choice([1, 2, 4], n),
        vpp=rng.choice([1, 2], n),
        cp=rng.choice([1, 2], n),
        dp=rng.choice([1, 2, 4], n),
        micro_batch_size=rng.choice([1, 2], n),
        recompute=rng.choice([0, 1, 2], n),
    )
    job = TrainingJob(seq_length=8192, global_batch_size=256)
    est = estimate_performance(LLAMA_70B, cluster(), job, batch, default_profile(H100))
    assert np.all(est.mfu > 0.0)
    assert np.all(est.mfu < 1.0)


def test_step_time_scales_linearly_with_global_batch() -> None:
    layout = [Layout(tp=2, pp=1, dp=32)]
    one = estimate(LLAMA_8B, layout, gbs=256).step_time_s[0]
    two = estimate(LLAMA_8B, layout, gbs=512).step_time_s[0]
    assert two / one == pytest.approx(2.0, rel=0.05)


def test_breakdown_sums_to_step_time() -> None:
    est = estimate(
        MIXTRAL_8X7B, [Layout(tp=2, pp=2, vpp=2, cp=2, ep=4, etp=1, dp=8, recompute="full")]
    )
    assert set(est.breakdown) == set(BREAKDOWN_KEYS)
    total = sum(v[0] for v in est.breakdown.values())
    assert total == pytest.approx(est.step_time_s[0], rel=1e-12)
    assert est.breakdown["ep_comm_s"][0] > 0
    assert est.breakdown["cp_comm_s"][0] >= 0


def test_full_recompute_costs_about_a_third_more_compute() -> None:
    est = estimate(LLAMA_8B, [Layout(tp=1, dp=64), Layout(tp=1, dp=64, recompute="full")])
    ratio = est.breakdown["recompute_s"][1] / est.breakdown["compute_s"][1]
    assert 0.25 < ratio < 0.4  # forward = 1/3 of forward + backward


def test_tokens_per_second_matches_step_time() -> None:
    est = estimate(LLAMA_8B, [Layout(tp=2, pp=2, dp=16)], gbs=256)
    assert est.tokens_per_s_per_gpu[0] == pytest.approx(256 * 8192 / est.step_time_s[0] / 64)


def test_model_flops_match_megatron_test_vector_a() -> None:
    # megatron-facts §8 case A: 5.397063e16 FLOPs per batch of 128 x 8192, t=2
    job = TrainingJob(seq_length=8192, global_batch_size=128)
    batch = LayoutBatch.from_columns(tp=[2], dp=[4])
    assert flops_per_iteration(LLAMA_8B, job, batch)[0] == pytest.approx(5.397063e16, rel=1e-6)


def test_a100_without_fp8_times_fp8_jobs_as_bf16() -> None:
    layout = [Layout(tp=8, pp=1, dp=8)]
    bf16 = estimate(LLAMA_70B, layout, gpu=A100, precision="bf16")
    fp8 = estimate(LLAMA_70B, layout, gpu=A100, precision="fp8")
    assert fp8.step_time_s[0] == pytest.approx(bf16.step_time_s[0])


def test_hundred_thousand_layouts_are_priced_in_one_vectorised_pass() -> None:
    rng = np.random.default_rng(1)
    n = 100_000
    batch = LayoutBatch.from_columns(
        tp=rng.choice([1, 2, 4, 8], n),
        pp=rng.choice([1, 2, 4, 8], n),
        vpp=rng.choice([1, 2], n),
        cp=rng.choice([1, 2], n),
        ep=rng.choice([1, 2, 4, 8], n),
        etp=1,
        dp=rng.choice([1, 2, 4, 8], n),
        micro_batch_size=rng.choice([1, 2], n),
    )
    job = TrainingJob(seq_length=4096, global_batch_size=512)

    def price(rows: LayoutBatch) -> object:
        return estimate_performance(MIXTRAL_8X7B, cluster(512), job, rows, default_profile(H100))

    assert_calls_do_not_grow(lambda: price(batch.take(np.arange(1_000))), lambda: price(batch))


def test_profile_round_trips_through_dict() -> None:
    prof = default_profile(H100).with_coefficients(gemm_efficiency=0.7)
    assert PerformanceProfile.from_dict(prof.to_dict()) == prof


def test_profile_rejects_an_overlap_above_one() -> None:
    with pytest.raises(SpecError, match="tp_overlap"):
        PerformanceProfile(gpu="x", tp_overlap=1.5)


def test_default_profiles_differ_by_architecture() -> None:
    assert default_profile(A100).tp_overlap == 0.0
    assert default_profile(H100).gemm_efficiency != default_profile(A100).gemm_efficiency


def test_expected_max_normal_is_zero_for_one_gpu_and_grows_like_sqrt_2_ln_n() -> None:
    z = expected_max_normal(np.array([1, 2, 8, 2048, 16384]))
    assert z[0] == 0.0
    assert z[1] == pytest.approx(0.5642, abs=0.03)  # exact E[max of 2] = 1/sqrt(pi)
    assert z[2] == pytest.approx(1.4236, abs=0.02)  # tabulated E[max of 8]
    assert np.all(np.diff(z) > 0)
    assert z[-1] < np.sqrt(2 * np.log(16384))  # the asymptote bounds it from above


def test_weak_scaling_loses_throughput_to_the_slowest_gpu() -> None:
    """Same work per data-parallel replica, more replicas: the slowest GPU sets the pace."""
    small = estimate(LLAMA_8B, [Layout(tp=2, dp=8)], gpus=16, gbs=16)
    large = estimate(LLAMA_8B, [Layout(tp=2, dp=1024)], gpus=2048, gbs=2048)
    ratio = large.tokens_per_s_per_gpu[0] / small.tokens_per_s_per_gpu[0]
    assert 0.9 < ratio < 0.995
    assert large.breakdown["straggler_s"][0] > small.breakdown["straggler_s"][0] > 0
    still = PerformanceProfile(gpu="h100-sxm-80gb", straggler_spread=0.0)
    job = TrainingJob(seq_length=8192, global_batch_size=16)
    one = estimate_performance(
        LLAMA_8B, cluster(16, 8, H100), job, LayoutBatch.from_layouts([Layout(tp=2, dp=8)]), still
    )
    assert one.breakdown["straggler_s"][0] == 0.0


def test_interleaving_hides_the_data_parallel_reduction_behind_later_chunks() -> None:
    """performance-facts §6.1: with v chunks only the last chunk's DP traffic is exposed."""
    big = ModelSpec(
        name="340b-like", num_layers=96, hidden_size=18432, ffn_hidden_size=73728,
        num_attention_heads=96, num_query_groups=8, vocab_size=256000, swiglu=False,
    )  # fmt: skip
    layouts = [Layout(tp=8, pp=8, vpp=v, dp=4) for v in (1, 12)]
    est = estimate(big, layouts, gpus=256, gbs=64, seq=4096)
    plain, interleaved = est.breakdown["dp_comm_s"]
    assert interleaved < plain / 3
    comm, pass_mb = np.array([0.3]), np.array([0.1])
    one = exposed_dp_comm(comm, pass_mb, np.array([8.0]), np.array([1.0]), 0.9)
    assert one[0] == pytest.approx(0.3 - 0.9 * 0.1)  # v = 1: only the last micro-batch hides it
