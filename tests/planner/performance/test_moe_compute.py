"""MoE expert GEMM granularity, router and permutation (mechanisms-facts §4)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.performance.moe_compute import (
    GemmRate,
    achieved_flop_per_s,
    expert_gemm_time,
    expert_mlp_time,
    permute_sides,
    router_time,
)
from planner.performance.moe_kernels import router_region_kernels
from planner.specs import SpecError

A = np.asarray
# H100 bf16 priors of the dense GEMM curve (planner.performance.profile hopper defaults)
H100 = GemmRate(
    peak_flop_per_s=989.4e12,
    plateau=0.71,
    half_tokens=45.0,
    half_flop=18e-6 * 989.4e12,
    hbm_bytes_per_s=0.8 * 3.35e12,
)


def tflops(path: str, groups: int, m: int, n: int, k: int) -> float:
    t = expert_gemm_time(
        H100, tokens_per_expert=A(float(m)), local_experts=A(float(groups)), n=n, k=k, path=path
    )  # type: ignore[arg-type]
    rate = achieved_flop_per_s(
        t, tokens_per_expert=A(float(m)), local_experts=A(float(groups)), n=n, k=k
    )
    return float(rate) / 1e12


@pytest.mark.parametrize(
    ("groups", "m", "multi", "cutlass"), [(8, 4096, 627.9, 650.6), (16, 2048, 553.9, 636.9)]
)
def test_te_pr_2045_multi_stream_versus_grouped_on_h100(
    groups: int, m: int, multi: float, cutlass: float
) -> None:
    """§4.2 (TE PR #2045, NVIDIA): (groups, M, N=768, K=2048); the grouped kernel wins and
    wins more with more, smaller groups. Predicted within 30 % of each measurement."""
    pm, pg = tflops("multi_stream", groups, m, 768, 2048), tflops("grouped", groups, m, 768, 2048)
    assert pg > pm
    assert abs(pm / multi - 1) < 0.3 and abs(pg / cutlass - 1) < 0.3


def test_grouped_gain_grows_as_experts_shrink() -> None:
    gain_big = tflops("grouped", 8, 4096, 768, 2048) / tflops("multi_stream", 8, 4096, 768, 2048)
    gain_small = tflops("grouped", 16, 2048, 768, 2048) / tflops(
        "multi_stream", 16, 2048, 768, 2048
    )
    assert gain_small > gain_big > 1.0


def test_paths_converge_for_large_experts() -> None:
    big = [tflops(p, 8, 32768, 4096, 4096) for p in ("multi_stream", "grouped", "sequential")]
    assert max(big) / min(big) < 1.05


def test_few_tokens_per_expert_are_weight_bandwidth_bound() -> None:
    """Every expert's weights cross HBM once per call: a floor that binds at small m, and a
    cost per token that falls as m grows (§4.2 reading)."""
    m = A([1.0, 16.0, 128.0, 1024.0])
    t = expert_gemm_time(
        H100, tokens_per_expert=m, local_experts=A(64.0), n=2048, k=7168, path="grouped"
    )
    weights = 64 * 2048 * 7168 * 2.0
    assert np.all(t >= weights / H100.hbm_bytes_per_s)
    assert np.all(np.diff(t / m) < 0)


def test_imbalance_slows_the_busiest_rank_and_is_validated() -> None:
    kw = {
        "tokens_per_expert": A(512.0),
        "local_experts": A(8.0),
        "n": 4096,
        "k": 2048,
        "path": "multi_stream",
    }
    base = expert_gemm_time(H100, **kw)  # type: ignore[arg-type]
    skew = expert_gemm_time(H100, imbalance=1.3, **kw)  # type: ignore[arg-type]
    assert 1.0 < float(skew / base) <= 1.3  # more tokens per expert also run faster
    with pytest.raises(SpecError, match="moe_imbalance"):
        expert_gemm_time(H100, imbalance=0.9, **kw)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="path"):
        expert_gemm_time(
            H100, tokens_per_expert=A(1.0), local_experts=A(1.0), n=1, k=1, path="magic"
        )  # type: ignore[arg-type]


def test_expert_mlp_backward_is_twice_forward() -> None:
    fwd, bwd = expert_mlp_time(
        H100,
        tokens_per_expert=A([256.0, 1024.0]),
        local_experts=A([32.0, 8.0]),
        hidden=2048,
        expert_ffn=768,
        gated=True,
        path="multi_stream",
    )
    assert np.allclose(bwd, 2 * fwd) and np.all(fwd > 0)


def _permute(**kw: object) -> tuple[float, float, float]:
    """One pass: (both sides, dispatch side, combine side)."""
    args: dict[str, object] = dict(
        tokens=A(4096.0), hidden=7168, topk=8, experts=256, dispatcher="alltoall",
        permute_fusion=True, hbm_bytes_per_s=8e12, permute_hbm_fraction=0.5,
    )  # fmt: skip
    dispatch, combine = permute_sides(**{**args, **kw})  # type: ignore[arg-type]
    return float(dispatch + combine), float(dispatch), float(combine)


def test_router_and_permute_costs() -> None:
    """§4.4: permute traffic ~14 K h B per token with alltoall, ~8 K h with flex, plus the
    fused permute's row_id_map (8E + 4 B per token, written and read once per pass) and the
    permute kernels' ~3 us each (8 fused kernels alltoall, 4 flex: moe_kernels)."""
    bw, tok, map_bytes = 4e12, 4096, 8 * 256 + 4
    fwd_a, _, _ = _permute()
    assert fwd_a == pytest.approx(tok * (14 * 8 * 7168 + 2 * map_bytes) / bw + 8 * 3e-6)
    fwd_f, _, _ = _permute(dispatcher="flex")
    assert fwd_f == pytest.approx(tok * (8 * 8 * 7168 + 2 * map_bytes) / bw + 4 * 3e-6)
    r_fwd, r_bwd = router_time(
        H100, tokens=A(4096.0), hidden=7168, experts=256, kernels_fwd=0.0, kernels_bwd=0.0
    )
    assert 0 < float(r_fwd) < float(r_bwd)
    with pytest.raises(SpecError, match="moe_dispatcher"):
        _permute(dispatcher="nccl")


def test_the_unfused_permute_moves_no_row_id_map_but_launches_three_times_the_kernels() -> None:
    """mechanisms-facts §4.4: the row_id_map, T x (2E + 1) int32, is the fused mask-map
    permute's; a release without --moe-permute-fusion (core < 0.11, §8) runs Megatron's
    unfused chain instead (6 kernels per permute against 2, moe_kernels), priced at ~3 us of
    GPU time each (performance-facts §8), as the memory side keeps no map for it."""
    bw, tok, copies = 4e12, 4096, 14 * 8 * 7168
    fused, _, _ = _permute()
    unfused, _, _ = _permute(permute_fusion=False)
    assert unfused == pytest.approx(tok * copies / bw + 4 * 6 * 3e-6)
    assert fused - unfused == pytest.approx(tok * 2 * (8 * 256 + 4) / bw - 4 * 4 * 3e-6)
    # the map grows with the experts on the fused path only
    assert _permute(experts=512)[0] - fused == pytest.approx(tok * 2 * 8 * 256 / bw)
    assert _permute(experts=512, permute_fusion=False)[0] == pytest.approx(unfused)


def test_permute_sides_split_the_bytes_as_the_sheet_lists_them() -> None:
    """§4.4: permute 1 and 2 (r + w K h 2 B each) before the experts, unpermute 2 (r + w) and
    unpermute 1 (read) after them: 8 and 6 K h; flex keeps permute 2 and unpermute 2: 4 and 4.
    Each side writes or reads the row_id_map once; its kernels: 2 ops x 2 fused each, flex 1
    op a side (moe_kernels.permute_ops)."""
    kw = dict(tokens=A(1000.0), hidden=1000, topk=1, experts=0.0, permute_fusion=True,
              hbm_bytes_per_s=2e12, permute_hbm_fraction=0.5)  # fmt: skip
    d, c = permute_sides(dispatcher="alltoall", **kw)  # type: ignore[arg-type]
    assert float(d) == pytest.approx(1000 * (8 * 1000 + 4) / 1e12 + 4 * 3e-6)
    assert float(c) == pytest.approx(1000 * (6 * 1000 + 4) / 1e12 + 4 * 3e-6)
    d, c = permute_sides(dispatcher="flex", **kw)  # type: ignore[arg-type]
    assert float(d) == pytest.approx(1000 * (4 * 1000 + 4) / 1e12 + 2 * 3e-6)
    assert float(c) == pytest.approx(1000 * (4 * 1000 + 4) / 1e12 + 2 * 3e-6)


def test_each_router_kernel_adds_its_fixed_gpu_time() -> None:
    """performance-facts §8: ~3 us per small kernel; the router region launches 78 kernels
    with the alltoall preprocessing, 31 + 6 with router fusion and 17 with DeepEP's fused
    layout (mechanisms-facts §3.2), backward half as many (moe_kernels)."""
    kw = dict(tokens=A(4096.0), hidden=7168, experts=256)
    counts = {
        "unfused": router_region_kernels(flex=False),
        "fused": router_region_kernels(flex=False, router_fusion=True),
        "deepep": router_region_kernels(flex=True),
    }
    assert counts == {"unfused": (78, 39), "fused": (37, 18.5), "deepep": (17, 8.5)}
    base_f, base_b = router_time(H100, kernels_fwd=0.0, kernels_bwd=0.0, **kw)  # type: ignore[arg-type]
    for k_fwd, k_bwd in counts.values():
        f, b = router_time(H100, kernels_fwd=k_fwd, kernels_bwd=k_bwd, **kw)  # type: ignore[arg-type]
        assert float(f - base_f) == pytest.approx(k_fwd * 3e-6)
        assert float(b - base_b) == pytest.approx(k_bwd * 3e-6)


def test_multi_stream_pools_all_experts_plus_one_latency_per_gemm_per_stream() -> None:
    """TE's 4 streams are joined only after the last expert (mechanisms-facts §4.1), so the 16
    GEMMs of TE PR #2045's (16, 2048, 768, 2048) pool like one grouped call, and each stream
    runs 4 of them at ~3 us of kernel latency each (performance-facts §8). By hand:
    F = 16 x 2 x 2048 x 768 x 2048 = 1.0308e11 FLOP; efficiency 0.71 x 2048/2093 x
    F/(F + 1.7809e10) = 0.5924; 1.0308e11 / (989.4e12 x 0.5924) = 175.9 us; + 4 x 3 us =
    187.9 us, i.e. 548.7 TFLOP/s against the 553.9 measured."""
    t = expert_gemm_time(
        H100, tokens_per_expert=A(2048.0), local_experts=A(16.0), n=768, k=2048, path="multi_stream"
    )
    assert float(t) == pytest.approx(187.9e-6, rel=2e-3)
    assert tflops("multi_stream", 16, 2048, 768, 2048) == pytest.approx(553.9, rel=0.02)
    grouped = expert_gemm_time(
        H100, tokens_per_expert=A(2048.0), local_experts=A(16.0), n=768, k=2048, path="grouped"
    )
    assert float(t - grouped) == pytest.approx(4 * 3e-6, rel=1e-6)
