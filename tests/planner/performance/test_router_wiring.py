"""The MoE router is charged on every MoE layer (mechanisms-facts §4.3, issue 12 item 6)."""

from __future__ import annotations

from dataclasses import replace

from planner.layouts import LayoutBatch
from planner.performance.compute import router_fwd_equivalent
from planner.performance.context import step_context
from planner.performance.expert_parallel import routed_expert_time
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, MIXTRAL_8X7B

JOB = TrainingJob(seq_length=4096, global_batch_size=512)
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64, gpus_per_node=8)


def _router(model, layout: Layout) -> float:
    ctx = step_context(
        model, CLUSTER, JOB, LayoutBatch.from_layouts([layout]), default_profile(H100)
    )
    return float(router_fwd_equivalent(ctx)[0])


def test_router_grows_with_experts_and_shrinks_with_sp() -> None:
    lay = Layout(tp=1, pp=1, ep=8, dp=64)
    few = _router(MIXTRAL_8X7B, lay)
    many = _router(replace(MIXTRAL_8X7B, num_experts=64), lay)
    assert 0 < few < many
    sp = Layout(tp=2, pp=1, ep=8, dp=32, sequence_parallel=True)
    assert _router(MIXTRAL_8X7B, sp) < few  # each GPU routes tokens / t


def test_router_is_a_small_part_of_the_moe_layer() -> None:
    lay = Layout(tp=1, pp=1, ep=8, dp=64)
    ctx = step_context(
        MIXTRAL_8X7B, CLUSTER, JOB, LayoutBatch.from_layouts([lay]), default_profile(H100)
    )
    share = float(router_fwd_equivalent(ctx)[0] / routed_expert_time(ctx)[0])
    assert 0.001 < share < 0.05
