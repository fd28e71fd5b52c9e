"""Host launch costs, D2H syncs and CUDA graphs (mechanisms-facts §3)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.performance.host_overhead import (
    HostCosts,
    dense_layer_kernels,
    micro_batch_time,
    moe_layer_kernels,
    step_host_time,
)
from planner.specs import SpecError

A = np.asarray
COSTS = HostCosts(
    per_kernel_s=5e-6, per_graph_launch_s=10e-6, per_sync_s=20e-6, per_micro_batch_s=100e-6
)


def test_dense_layer_counts_follow_the_sheet() -> None:
    """§3.2: a TE layer with TP + SP launches ~14-16 kernels forward and ~25-30 backward."""
    k = dense_layer_kernels(tp=A([8.0, 1.0]), cp=A([1.0, 1.0]))
    assert 14 <= k.fwd[0] <= 16 and 25 <= k.bwd[0] <= 30
    assert k.fwd[1] == k.fwd[0] - 4  # no AG/RS without TP
    fp8 = dense_layer_kernels(tp=A([8.0]), cp=A([1.0]), fp8=True)
    assert fp8.fwd[0] > k.fwd[0] and fp8.bwd[0] > k.bwd[0]


def test_cp_adds_ring_kernels() -> None:
    """§3.2: c attention calls + c-1 send/recv pairs + ~2c correction kernels."""
    base, cp4 = (
        dense_layer_kernels(tp=A([2.0]), cp=A([1.0])),
        dense_layer_kernels(tp=A([2.0]), cp=A([4.0])),
    )
    assert cp4.fwd[0] - base.fwd[0] == 3 + 3 + 8


def test_moe_layer_launch_count_grows_with_local_experts_only_on_the_multi_stream_path() -> None:
    """§4.1: the default GroupedLinear launches one GEMM per local expert; grouped kernels one."""
    experts = A([4.0, 32.0])
    multi = moe_layer_kernels(tp=A([1.0, 1.0]), cp=A([1.0, 1.0]), local_experts=experts)
    grouped = moe_layer_kernels(
        tp=A([1.0, 1.0]), cp=A([1.0, 1.0]), local_experts=experts, grouped_gemm="grouped"
    )
    assert multi.bwd[1] - multi.bwd[0] == 4 * 28  # dgrad + wgrad of FC1 and FC2 per expert
    assert grouped.fwd[0] == grouped.fwd[1] < multi.fwd[0]
    fused = moe_layer_kernels(tp=A([1.0]), cp=A([1.0]), local_experts=A([4.0]), router_fusion=True)
    assert multi.fwd[0] - fused.fwd[0] == 72 - 31  # router fusion (MLM-DSV3 §2.1.4)


def _mb(graphs: str, dispatcher: str = "alltoall", gpu_fwd: float = 1e-3):  # type: ignore[no-untyped-def]
    dense = dense_layer_kernels(tp=A([2.0]), cp=A([1.0]))
    moe = moe_layer_kernels(tp=A([2.0]), cp=A([1.0]), local_experts=A([32.0]))
    return micro_batch_time(
        dense_layers=A([0.0]),
        moe_layers=A([24.0]),
        dense_gpu_fwd_s=A([0.0]),
        dense_gpu_bwd_s=A([0.0]),
        moe_gpu_fwd_s=A([gpu_fwd]),
        moe_gpu_bwd_s=A([2 * gpu_fwd]),
        dense_kernels=dense,
        moe_kernels=moe,
        cuda_graphs=graphs,  # type: ignore[arg-type]
        dispatcher=dispatcher,
        costs=COSTS,  # type: ignore[arg-type]
        moe_eager_share=0.5,
        moe_side_shares=(0.1, 0.1),  # dispatch and combine: permutes and the all-to-alls
    )


def test_gpu_bound_layers_pay_only_the_syncs() -> None:
    r = _mb("none", gpu_fwd=5e-3)
    assert float(r.syncs[0]) == 24
    assert float(r.exposed_s[0]) == pytest.approx(24 * 20e-6 + 100e-6)


def test_host_bound_layers_run_at_the_hosts_pace_and_graphs_remove_launches() -> None:
    eager, partial = _mb("none", gpu_fwd=50e-6), _mb("partial", gpu_fwd=50e-6)
    assert float(eager.total_s[0]) == pytest.approx(float(eager.host_s[0]) + 24 * 20e-6)
    assert float(partial.total_s[0]) < float(eager.total_s[0])
    assert float(partial.host_s[0]) < float(eager.host_s[0])


def test_syncs_stop_the_host_running_ahead() -> None:
    """With a sync per layer the host cannot bank time from a slow layer for a fast one."""
    r_sync, r_free = _mb("none", "alltoall", 300e-6), _mb("none", "sync_free", 300e-6)
    assert float(r_sync.total_s[0]) >= float(r_free.total_s[0]) + 24 * 20e-6 - 1e-12


def test_full_iteration_graphs_need_a_sync_free_dispatcher() -> None:
    with pytest.raises(SpecError, match="cuda_graphs") as err:
        _mb("full_iteration", "alltoall")
    assert err.value.field == "cuda_graphs"
    full = _mb("full_iteration", "sync_free", gpu_fwd=50e-6)
    assert float(full.exposed_s[0]) == pytest.approx(10e-6)
    assert step_host_time(cuda_graphs="full_iteration", costs=COSTS) == pytest.approx(30e-6)


def test_bad_settings_name_their_field() -> None:
    with pytest.raises(SpecError, match="cuda_graphs='some'"):
        _mb("some")
    with pytest.raises(SpecError, match="moe_dispatcher"):
        _mb("none", "nccl")
    with pytest.raises(SpecError, match="per_kernel_s"):
        HostCosts(per_kernel_s=-1.0)


def test_a_sync_exposes_the_eager_experts_launches_even_when_the_gpu_is_slower_overall() -> None:
    """After the dispatch sync the GPU waits while the host launches the eager experts; the
    attention behind them cannot start earlier (two-stage flow shop, §3.1/§3.3). Without the
    sync the same launches hide behind the GPU."""
    gpu_fwd = 3e-3  # host per layer fwd ~1.7 ms at 10 us/kernel: eager part ~0.85 ms
    kw = dict(dense_layers=A([0.0]), moe_layers=A([1.0]), dense_gpu_fwd_s=A([0.0]),
              dense_gpu_bwd_s=A([0.0]), moe_gpu_fwd_s=A([gpu_fwd]),
              moe_gpu_bwd_s=A([10 * gpu_fwd]),
              dense_kernels=dense_layer_kernels(tp=A([2.0]), cp=A([1.0])),
              moe_kernels=moe_layer_kernels(tp=A([2.0]), cp=A([1.0]), local_experts=A([32.0])),
              costs=HostCosts(per_kernel_s=10e-6), moe_eager_share=0.1,
              moe_side_shares=(0.01, 0.01))  # fmt: skip
    synced = micro_batch_time(cuda_graphs="none", dispatcher="alltoall", **kw)  # type: ignore[arg-type]
    free = micro_batch_time(cuda_graphs="none", dispatcher="sync_free", **kw)  # type: ignore[arg-type]
    eager_host = 10e-6 * float(kw["moe_kernels"].eager_fwd[0])  # type: ignore[attr-defined]
    assert eager_host + 0.9 * gpu_fwd > gpu_fwd  # the flow-shop path binds
    fwd_synced = float(synced.total_s[0]) - 10 * gpu_fwd - 100e-6 - 20e-6
    assert fwd_synced == pytest.approx(eager_host + 0.9 * gpu_fwd)
    assert float(free.exposed_s[0]) == pytest.approx(100e-6)


def test_graphs_pay_a_static_buffer_copy_per_captured_region() -> None:
    """GPU-bound layers: graphs remove no visible host time but copy their inputs (§3.4);
    per-layer graphs leave the schedule's per-micro-batch work eager."""
    kw = dict(dense_layers=A([4.0]), moe_layers=A([0.0]), dense_gpu_fwd_s=A([5e-3]),
              dense_gpu_bwd_s=A([1e-2]), moe_gpu_fwd_s=A([0.0]), moe_gpu_bwd_s=A([0.0]),
              dense_kernels=dense_layer_kernels(tp=A([1.0]), cp=A([1.0])), moe_kernels=None,
              dispatcher="alltoall", costs=COSTS, moe_eager_share=0.0)  # fmt: skip
    eager = micro_batch_time(cuda_graphs="none", **kw)  # type: ignore[arg-type]
    graphed = micro_batch_time(cuda_graphs="partial", graph_copy_s=20e-6, **kw)  # type: ignore[arg-type]
    assert float(graphed.total_s[0]) - float(eager.total_s[0]) == pytest.approx(4 * 2 * 20e-6)


def _one_moe_layer(graphs: str, *, router_host_heavy: bool = False, bwd_s: float = 10e-3):  # type: ignore[no-untyped-def]
    moe = moe_layer_kernels(tp=A([2.0]), cp=A([1.0]), local_experts=A([32.0]))
    return micro_batch_time(
        dense_layers=A([0.0]),
        moe_layers=A([1.0]),
        dense_gpu_fwd_s=A([0.0]),
        dense_gpu_bwd_s=A([0.0]),
        moe_gpu_fwd_s=A([1e-3]),
        moe_gpu_bwd_s=A([bwd_s]),
        dense_kernels=dense_layer_kernels(tp=A([2.0]), cp=A([1.0])),
        moe_kernels=moe,
        cuda_graphs=graphs,  # type: ignore[arg-type]
        dispatcher="alltoall",
        costs=HostCosts(per_kernel_s=10e-6 if router_host_heavy else 1e-6),
        moe_eager_share=0.5,
        moe_router_share=0.0,
        moe_side_shares=(0.01, 0.01),
    )


def test_partial_graphs_launch_one_graph_per_moe_layer_and_pass() -> None:
    """§3.4: graph count L_local x m x 2; attention and router are contiguous, one region."""
    moe = moe_layer_kernels(tp=A([2.0]), cp=A([1.0]), local_experts=A([32.0]))
    r = _one_moe_layer("partial")
    eager = float(moe.eager_fwd[0] + moe.eager_bwd[0]) * 1e-6
    assert float(r.host_s[0]) == pytest.approx(eager + 2 * 10e-6 + 100e-6)


def test_the_router_before_the_sync_hides_behind_the_previous_backward() -> None:
    """1F1B runs a backward between two forwards: the first layer's router launches, the last
    ones before its sync, queue behind that backward's GPU work; the eager experts after a
    sync do not."""
    moe = moe_layer_kernels(tp=A([2.0]), cp=A([1.0]), local_experts=A([32.0]))
    r = _one_moe_layer("none", router_host_heavy=True)
    eager_fwd = float(moe.eager_fwd[0]) * 10e-6
    assert eager_fwd > 0.5e-3  # the experts' launches outlast their GPU time after the sync
    expected = eager_fwd + 0.5e-3 + 10e-3 + 20e-6 + 100e-6  # + rest of the GPU, sync, fixed
    assert float(r.total_s[0]) == pytest.approx(expected)
    short_bwd = _one_moe_layer("none", router_host_heavy=True, bwd_s=0.1e-3)
    assert float(short_bwd.total_s[0]) == pytest.approx(float(short_bwd.host_s[0]) + 20e-6)


def test_dense_layers_of_a_moe_model_keep_their_mlp_eager_under_the_moe_graph_modules() -> None:
    """§3.4: the dropless recipe captures attn, moe_router, moe_preprocess; `mlp` is not in
    it, so a dense layer of a MoE model launches its MLP half eagerly."""
    whole = dense_layer_kernels(tp=A([2.0]), cp=A([1.0]))
    attn_only = dense_layer_kernels(tp=A([2.0]), cp=A([1.0]), mlp_captured=False)
    assert float(whole.eager_fwd[0]) == 0.0
    assert float(attn_only.eager_fwd[0]) == 7  # norm, AG, FC1, SwiGLU, FC2, RS, residual add
    assert float(attn_only.fwd[0]) == float(whole.fwd[0])
    assert float(attn_only.bwd[0]) == float(whole.bwd[0])


def test_deepep_fuses_router_and_preprocess() -> None:
    """§3.2: router + EP preprocess with DeepEP's fused layout kernel: 17 kernels."""
    k = dict(tp=A([1.0]), cp=A([1.0]), local_experts=A([8.0]))
    flex = moe_layer_kernels(dispatcher="flex_deepep", **k)  # type: ignore[arg-type]
    a2a = moe_layer_kernels(dispatcher="alltoall", **k)  # type: ignore[arg-type]
    assert float(np.ravel(flex.router_fwd)[0]) == 17
    assert float(np.ravel(a2a.router_fwd)[0]) == 72 + 6
