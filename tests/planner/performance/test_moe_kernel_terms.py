"""The MoE layer's small kernels on both sides of the step time (mechanisms-facts §3.2, §4.4;
performance-facts §8): one count per kernel group (planner.performance.moe_kernels) sets the
host's launches and the GPU's fixed time, and the eager part after the dispatch sync reaches
the launch queue as dispatch, experts and combine."""

from __future__ import annotations

import numpy as np
import pytest

from planner.performance.compute import router_fwd_equivalent
from planner.performance.expert_parallel import PERMUTE_HBM_FRACTION, routed_expert_parts
from planner.performance.host_overhead import (
    HostCosts,
    dense_layer_kernels,
    micro_batch_time,
    moe_layer_kernels,
)
from planner.performance.moe_compute import PERMUTE_BYTES_PER_COPY
from planner.performance.moe_kernels import PERMUTE_FUSED, PERMUTE_UNFUSED, permute_ops
from planner.specs import Layout
from tests.planner.fixtures import MIXTRAL_8X7B
from tests.planner.performance.test_host_term import _kernels_seen
from tests.planner.performance.test_mechanism_wiring import ctx_for

A = np.asarray
LATENCY = 3e-6  # performance-facts §8: per memory-bound kernel


def test_deepeps_fused_router_region_shortens_the_gpu_side_too() -> None:
    """§3.2: the router region launches 72 + 6 kernels with the alltoall dispatcher and 17
    with DeepEP's fused layout kernel (backward half as many each); the compute term prices
    each at ~3 us, in forward units ((fwd + bwd) / 3)."""
    layouts = [Layout(tp=1, ep=8, dp=8, moe_dispatcher=d) for d in ("alltoall", "flex")]
    alltoall, flex = router_fwd_equivalent(ctx_for(MIXTRAL_8X7B, 4096, layouts))
    assert alltoall - flex == pytest.approx((78 + 39 - 17 - 8.5) * LATENCY / 3.0)


def test_a_release_without_permute_fusion_moves_no_row_id_map() -> None:
    """§4.4: the int32 row_id_map of T x (2E + 1) is the fused permute's (core >= 0.11, §8),
    written before the experts and read after them in each pass; core 0.10's unfused chain
    has none but launches 6 kernels per permute against 2 (2 permutes on each side)."""
    lay = [Layout(tp=1, ep=8, dp=8, moe_dispatcher="alltoall")]
    fused = ctx_for(MIXTRAL_8X7B, 4096, lay, megatron_core_version="0.11")
    unfused = ctx_for(MIXTRAL_8X7B, 4096, lay, megatron_core_version="0.10")
    a, b = routed_expert_parts(fused), routed_expert_parts(unfused)
    bw = fused.gpu.hbm_bandwidth_bytes_per_s * PERMUTE_HBM_FRACTION
    row_id_map = fused.tokens[0] * (8 * 8 + 4) / bw  # Mixtral: E = 8
    kernels = 2 * (PERMUTE_UNFUSED - PERMUTE_FUSED) * LATENCY
    for side in ("dispatch", "combine"):  # each side, forward and backward: x 2 / 3
        diff = float(getattr(a, side)[0] - getattr(b, side)[0])
        assert diff == pytest.approx((row_id_map - kernels) * 2.0 / 3.0)
    assert float(a.experts[0]) == float(b.experts[0])


def test_dispatch_and_combine_kernels_add_up_to_the_eager_launches() -> None:
    """§4.4 / §3.2: alltoall runs permute 1 and 2, tokens and probs out; unpermute 2 and 1,
    the combine back; flex fuses permute 1 and unpermute 1 into its one kernel each way."""
    one = dict(tp=A([1.0]), cp=A([1.0]), local_experts=A([8.0]))
    k = moe_layer_kernels(**one)  # type: ignore[arg-type]
    assert (k.dispatch_fwd, k.combine_fwd) == (2 * 2 + 2, 2 * 2 + 2)
    flex = moe_layer_kernels(dispatcher="flex_deepep", **one)  # type: ignore[arg-type]
    assert (flex.dispatch_fwd, flex.combine_fwd) == (1 * 2 + 1, 1 * 2 + 1)
    # the experts' group keeps the GEMMs (2 per local expert + 8 stream events) and activation
    assert float(k.eager_fwd[0]) - k.dispatch_fwd - k.combine_fwd == 2 * 8 + 8 + 1


def _one_layer(sides: tuple[float, float]) -> float:
    """One MoE layer, 1 ms forward and 10 ms backward on the GPU, 10 us per launch; the eager
    part is 0.6 of its GPU time."""
    r = micro_batch_time(
        dense_layers=A([0.0]), moe_layers=A([1.0]), dense_gpu_fwd_s=A([0.0]),
        dense_gpu_bwd_s=A([0.0]), moe_gpu_fwd_s=A([1e-3]), moe_gpu_bwd_s=A([10e-3]),
        dense_kernels=dense_layer_kernels(tp=A([1.0]), cp=A([1.0])),
        moe_kernels=moe_layer_kernels(tp=A([1.0]), cp=A([1.0]), local_experts=A([32.0])),
        cuda_graphs="none", dispatcher="alltoall", costs=HostCosts(per_kernel_s=10e-6),
        moe_eager_share=0.6, moe_side_shares=sides,
    )  # fmt: skip
    return float(r.total_s[0]) - 20e-6 - 100e-6  # less the sync and the per-micro-batch cost


def test_the_combine_runs_after_the_experts_launches() -> None:
    """host_queue: T = max over boundaries of host prefix + GPU of the rest. After the sync the
    host launches the dispatch (6 kernels), the 32 experts' GEMMs, stream events and activation
    (73 kernels: 730 us) and the combine (6); a combine that holds 0.5 ms of the layer's GPU
    time (the all-to-all back) cannot start before the experts' launches, so the boundary after
    the experts binds:
    60 + 730 us of launches, then 0.5 ms of combine and the rest of the GPU work (0.4 ms of
    attention and router, 10 ms backward). One lump of eager kernels had put all 850 us of
    launches before 0.4 + 10 ms of GPU time."""
    split = _one_layer((0.05, 0.5))
    rest = 0.4e-3 + 10e-3
    assert split == pytest.approx(60e-6 + 730e-6 + 0.5e-3 + rest)
    lump = 850e-6 + rest
    assert split - lump == pytest.approx(0.5e-3 - 60e-6)
    # a light combine hides behind nothing: the lump's boundary after the combine binds again
    assert _one_layer((0.05, 0.01)) == pytest.approx(lump)


def test_the_host_term_passes_the_permute_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    """host_term: the dispatch's and the combine's GPU shares are their permutes (x 3: forward
    units to a layer's forward + backward) over the layer's GPU time."""
    layouts = [Layout(tp=1, ep=8, dp=8, moe_dispatcher="alltoall")]
    seen = _kernels_seen(monkeypatch, layouts)  # at 50 ms of GPU time per micro-batch
    ctx = ctx_for(MIXTRAL_8X7B, 4096, layouts)
    parts = routed_expert_parts(ctx)
    per_layer = 50e-3 / ctx.layers_per_stage
    d, c = seen[0]["moe_side_shares"]
    assert float(np.ravel(d)[0]) == pytest.approx(3.0 * parts.dispatch[0] / per_layer)
    assert float(np.ravel(c)[0]) == pytest.approx(3.0 * parts.combine[0] / per_layer)
    assert float(np.ravel(d)[0]) > float(np.ravel(c)[0]) > 0  # §4.4: 8 K h before, 6 K h after


def test_each_side_launches_the_permutes_its_bytes_count() -> None:
    """mechanisms-facts §4.4: the flex path moves ~8 K h B per token, permute 2 (4 K h) before
    the experts and unpermute 2 (4 K h) after them: DeepEP's dispatch does permute 1's copies
    and its combine unpermute 1's weighted sum. Its kernels are one permute op a side, as its
    bytes are (moe_compute.PERMUTE_BYTES_PER_COPY); alltoall runs two a side."""
    flex, alltoall = permute_ops(flex=True), permute_ops(flex=False)
    assert (flex.dispatch, flex.combine) == (1.0, 1.0)
    assert (alltoall.dispatch, alltoall.combine) == (2.0, 2.0)
    # an op reads and writes K h 2 B (4 K h); unpermute 1 only reads (2 K h): §4.4
    for ops, side in ((flex, PERMUTE_BYTES_PER_COPY["flex"]),
                      (alltoall, PERMUTE_BYTES_PER_COPY["alltoall"])):  # fmt: skip
        assert 4.0 * ops.dispatch == side.dispatch
        assert 4.0 * ops.combine - (2.0 if ops.combine == 2.0 else 0.0) == side.combine
