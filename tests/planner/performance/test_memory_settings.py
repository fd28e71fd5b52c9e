"""Time side of the memory settings: each costs or saves the seconds it should."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner.layouts import LayoutBatch
from planner.performance.step_time import PerformanceEstimate, default_profile, estimate_performance
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import LLAMA_8B as LLAMA8B
from tests.planner.fixtures import MIXTRAL_8X7B as MIXTRAL
from tests.planner.memory.test_estimate import GPU

HOSTED = ClusterSpec(
    name="hosted",
    gpu=replace(GPU, host_link_bandwidth_bytes_per_s=64e9),
    num_gpus=16,
    host_memory_bytes_per_gpu=256e9,
)
JOB = TrainingJob(seq_length=4096, global_batch_size=256)


def perf(layouts: list[Layout], model: object = LLAMA8B) -> PerformanceEstimate:
    return estimate_performance(
        model,  # type: ignore[arg-type]
        HOSTED,
        JOB,
        LayoutBatch.from_layouts(layouts),
        default_profile(HOSTED.gpu),
    )


def test_bf16_gradient_reduction_halves_the_dp_traffic() -> None:
    base = Layout(tp=2, dp=8)
    est = perf([base, replace(base, grad_reduce_dtype="bf16")])
    dp = est.breakdown["dp_comm_s"]
    assert dp[1] < dp[0]
    assert est.step_time_s[1] < est.step_time_s[0]


def test_bf16_moments_speed_up_the_optimizer_step() -> None:
    base = Layout(tp=2, dp=8)
    opt = perf([base, replace(base, optimizer_state_dtype="bf16")]).breakdown["optimizer_s"]
    assert opt[1] == pytest.approx(opt[0] * 22 / 34)


def test_optimizer_offload_costs_host_time_in_proportion() -> None:
    lays = [Layout(tp=2, dp=8, optimizer_offload_fraction=f) for f in (0.0, 0.5, 1.0)]
    opt = perf(lays).breakdown["optimizer_s"]
    assert opt[0] < opt[1] < opt[2]
    assert opt[2] - opt[0] == pytest.approx(2 * (opt[1] - opt[0]), rel=0.05)


def test_recompute_modules_replay_their_forward() -> None:
    sel = Layout(tp=2, dp=8, recompute="selective")
    rec = perf([sel, replace(sel, recompute_modules=("core_attn", "mlp"))]).breakdown
    assert rec["recompute_s"][1] > rec["recompute_s"][0] > 0
    moe = Layout(tp=2, ep=8, dp=8, recompute="selective", moe_a2a_overlap=False)
    mrec = perf(
        [moe, replace(moe, recompute_modules=("core_attn", "moe"))], model=MIXTRAL
    ).breakdown
    assert mrec["recompute_s"][1] > mrec["recompute_s"][0]
    assert mrec["ep_comm_s"][1] > mrec["ep_comm_s"][0]  # the whole MoE block replays its A2A


def test_block_recompute_replays_only_its_layers() -> None:
    full = [Layout(tp=2, dp=8, recompute="full", recompute_num_layers=n) for n in (None, 8)]
    rec = perf(full).breakdown["recompute_s"]
    assert rec[1] == pytest.approx(rec[0] / 4)  # 8 of 32 layers


def test_activation_offload_is_hidden_until_the_link_saturates() -> None:
    lays = [Layout(tp=2, dp=8, activation_offload_layers=n) for n in (0, 4, 30)]
    off = perf(lays).breakdown["offload_s"]
    assert off[0] == 0.0
    assert off[2] > off[1] >= 0.0
