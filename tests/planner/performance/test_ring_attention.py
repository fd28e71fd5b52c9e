"""Context-parallel attention step by step (mechanisms-facts §1.2-1.5)."""

from __future__ import annotations

import numpy as np
import pytest

from models_db import load_gpu
from models_db.collectives import load_collective_table
from planner.performance.attention_kernel import (
    AttentionKernel,
    attention_call_time,
    attention_kernel_prior,
    hopper_attention_prior,
    wave_efficiency,
)
from planner.performance.collective_bandwidth import group_params
from planner.performance.ring_attention import (
    AttentionShape,
    all_gather_kv,
    cp_attention_time,
    cp_members_per_node,
    hierarchical_a2a_p2p,
    kv_bytes_per_rank,
    ring_crosses_nodes,
    ring_p2p,
    ulysses_a2a,
)
from planner.specs import SpecError

A = np.asarray
MIB = 2**20
# the sheet's arithmetic: a kernel at a constant 500 TFLOP/s, links without latency (§1.2)
FLAT = AttentionKernel(
    peak_flop_per_s=500e12,
    fwd_plateau=1.0,
    bwd_plateau=1.0,
    fwd_half_keys=0.0,
    bwd_half_keys=0.0,
)


def shape(s: float, c: float, a: float, g: float, b: float = 1.0) -> AttentionShape:
    return AttentionShape(
        batch=A([b]), seq_length=A([s]), cp=A([c]), heads=A([a]), kv_heads=A([g]), head_dim=128
    )


def p2p(kernel: AttentionKernel, sh: AttentionShape, beta: float, half: float = 0.0):  # type: ignore[no-untyped-def]
    return ring_p2p(
        kernel, sh, p2p_beta_max=A([beta]), p2p_s_half=A([half]), hbm_bytes_per_s=2.7e12
    )


def test_sheet_example_70b_gqa_at_128k_is_fully_hidden() -> None:
    """§1.2: a = 64, g = 8, t = 8, s = 128K, c = 8: |KV| 8 MiB per step, 47 us on NVLink
    against ~1.1 ms of attention per step."""
    sh = shape(131072, 8, 8, 1)
    assert kv_bytes_per_rank(sh)[0] == 8 * MIB
    r = p2p(FLAT, sh, 180e9)
    assert r.fwd_comm_s[0] / 7 == pytest.approx(47e-6, rel=0.02)
    assert r.fwd_attention_s[0] / 8 == pytest.approx(1.1e-3, rel=0.01)
    assert r.fwd_exposed_s[0] == 0.0


def test_sheet_example_7b_mha_hides_on_nvlink_but_not_across_nodes() -> None:
    """§1.2: 7B MHA, s = 32K, c = 4: |KV| 128 MiB; 0.75 ms on NVLink (hidden); ~3.4 ms at
    40 GB/s, ~2.3 ms exposed per step."""
    sh = shape(32768, 4, 32, 32)
    assert kv_bytes_per_rank(sh)[0] == 128 * MIB
    nvlink, network = p2p(FLAT, sh, 180e9), p2p(FLAT, sh, 40e9)
    assert nvlink.fwd_comm_s[0] / 3 == pytest.approx(0.75e-3, rel=0.01)
    assert nvlink.fwd_exposed_s[0] == 0.0
    assert network.fwd_comm_s[0] / 3 == pytest.approx(3.4e-3, rel=0.02)
    assert network.fwd_exposed_s[0] / 3 == pytest.approx(2.3e-3, rel=0.03)


def test_overlap_condition_of_the_sheet() -> None:
    """§1.2: hidden iff s_l >= 2 (g_l / a_l) (eta peak) / beta_p2p."""
    beta = 180e9
    threshold = 2.0 * (1 / 8) * 500e12 / beta  # GQA a/g = 8: ~700 tokens (sheet: ~800)
    above = p2p(FLAT, shape(4 * threshold * 1.2, 4, 8, 1), beta)
    below = p2p(FLAT, shape(4 * threshold * 0.8, 4, 8, 1), beta)
    assert above.fwd_exposed_s[0] == 0.0 and below.fwd_exposed_s[0] > 0.0


@pytest.mark.parametrize("c", [2, 4, 8, 16])
def test_ring_does_one_cth_of_causal_attention_in_c_calls(c: int) -> None:
    sh = shape(65536, c, 16, 4)
    r = p2p(FLAT, sh, 1e15)
    full = 4.0 * 16 * 65536**2 / 2 * 128 / 500e12  # whole causal attention on one GPU
    assert r.fwd_attention_s[0] == pytest.approx(full / c, rel=1e-9)
    assert r.bwd_attention_s[0] == pytest.approx(2.5 * full / c, rel=1e-9)
    assert r.kernel_calls[0] == c


def test_backward_moves_twice_the_forward_traffic() -> None:
    """§1.2: forward (c-1) |KV|, backward 2 (c-1) |KV| per rank per layer."""
    for c in (2, 4, 8):
        r = p2p(FLAT, shape(65536, c, 16, 4), 100e9)
        assert r.bwd_comm_s[0] == pytest.approx(2.0 * r.fwd_comm_s[0])


def test_gqa_hides_where_mha_does_not_and_crossing_nodes_exposes_more() -> None:
    mha, gqa = p2p(FLAT, shape(32768, 8, 32, 32), 180e9), p2p(FLAT, shape(32768, 8, 32, 4), 180e9)
    assert gqa.fwd_exposed_s[0] < mha.fwd_exposed_s[0]
    inside, across = (
        p2p(FLAT, shape(32768, 8, 32, 8), 180e9),
        p2p(FLAT, shape(32768, 8, 32, 8), 45e9),
    )
    assert across.fwd_exposed_s[0] + across.bwd_exposed_s[0] > inside.bwd_exposed_s[0]


def test_no_cp_is_plain_attention_without_comm() -> None:
    r = p2p(hopper_attention_prior(989.4e12, 132), shape(8192, 1, 32, 8), 180e9)
    assert r.fwd_comm_s[0] == r.fwd_exposed_s[0] == r.bwd_exposed_s[0] == r.correction_s[0] == 0


def test_hopper_prior_reproduces_the_flash_attention_3_figure() -> None:
    """performance-facts §2.3: FA3 causal d = 128 forward 521 / 579 / 602 / 616 TFLOP/s at
    s = 2k..16k with b x s = 16k tokens and 16 heads."""
    kernel = hopper_attention_prior(989.4e12, 132)
    for s, measured in ((2048, 521), (4096, 579), (8192, 602), (16384, 616)):
        bh = 16384 / s * 16
        t = attention_call_time(
            kernel, batch_heads=A(bh), query_rows=A(float(s)), pairs=A(s * s / 2.0), head_dim=128
        )
        rate = 4.0 * bh * s * s / 2 * 128 / t / 1e12
        assert rate == pytest.approx(measured, rel=0.06)


def test_wave_efficiency_from_the_sm_count() -> None:
    assert wave_efficiency(A([132.0, 133.0, 66.0]), 132).tolist() == pytest.approx(
        [1.0, 133 / 264, 0.5]
    )
    assert wave_efficiency(A([7.0]), None)[0] == 1.0
    # few heads per GPU: one call at b = 1, 2 heads, 4k rows leaves most of 132 SMs idle
    kernel = hopper_attention_prior(989.4e12, 132)
    few = attention_call_time(
        kernel, batch_heads=A(2.0), query_rows=A(4096.0), pairs=A(4096.0**2 / 2), head_dim=128
    )
    many = attention_call_time(
        kernel, batch_heads=A(32.0), query_rows=A(4096.0), pairs=A(4096.0**2 / 2), head_dim=128
    )
    assert float(few) * 16 > 1.8 * float(many)  # 64 CTAs on 132 SMs: about half the rate


def test_all_gather_variant_exposes_everything() -> None:
    """§1.3: the K/V all-gather (and the backward reduce-scatter) are exposed."""
    sh = shape(65536, 4, 16, 4)
    r = all_gather_kv(
        FLAT,
        sh,
        ag_beta_max=A([300e9]),
        ag_s_half=A([0.0]),
        rs_beta_max=A([300e9]),
        rs_s_half=A([0.0]),
    )
    gathered = 4 * kv_bytes_per_rank(sh)[0]
    assert r.fwd_exposed_s[0] == pytest.approx(0.75 * gathered / 300e9)
    assert r.bwd_exposed_s[0] == pytest.approx(2 * r.fwd_exposed_s[0])
    full = 4.0 * 16 * 65536**2 / 2 * 128 / 500e12
    assert r.fwd_attention_s[0] == pytest.approx(full / 4, rel=1e-6)
    assert r.kernel_calls[0] == 2


def test_ulysses_needs_heads_divisible_by_cp() -> None:
    ok = ulysses_a2a(FLAT, shape(65536, 4, 16, 4), a2a_beta_max=A([300e9]), a2a_s_half=A([0.0]))
    bad = ulysses_a2a(FLAT, shape(65536, 4, 16, 2), a2a_beta_max=A([300e9]), a2a_s_half=A([0.0]))
    assert np.isfinite(ok.total_s[0]) and np.isinf(bad.total_s[0])
    assert ok.fwd_exposed_s[0] == ok.fwd_comm_s[0] > 0  # "A2A cannot be overlapped"
    full = 4.0 * 16 * 65536**2 / 2 * 128 / 500e12
    assert ok.fwd_attention_s[0] == pytest.approx(full / 4, rel=1e-6)


def test_hierarchical_with_an_inner_group_of_one_is_the_ring() -> None:
    sh = shape(65536, 8, 16, 4)
    ring = p2p(FLAT, sh, 45e9, MIB)
    hier = hierarchical_a2a_p2p(
        FLAT,
        sh,
        inner=A([1.0]),
        a2a_beta_max=A([300e9]),
        a2a_s_half=A([0.0]),
        p2p_beta_max=A([45e9]),
        p2p_s_half=A([float(MIB)]),
        hbm_bytes_per_s=2.7e12,
    )
    assert hier.total_s[0] == pytest.approx(ring.total_s[0])
    # an inner a2a group gives the ring c / c1 steps of the same bytes and c1 x more work each
    two = hierarchical_a2a_p2p(  # a free all-to-all isolates the ring's part
        FLAT,
        sh,
        inner=A([2.0]),
        a2a_beta_max=A([1e18]),
        a2a_s_half=A([0.0]),
        p2p_beta_max=A([45e9]),
        p2p_s_half=A([float(MIB)]),
        hbm_bytes_per_s=2.7e12,
    )
    assert two.fwd_comm_s[0] == pytest.approx(3 / 7 * ring.fwd_comm_s[0], rel=1e-6)
    assert two.fwd_attention_s[0] / 4 == pytest.approx(2 * ring.fwd_attention_s[0] / 8)
    exposed = two.bwd_exposed_s[0] + two.fwd_exposed_s[0]
    assert exposed <= ring.bwd_exposed_s[0] + ring.fwd_exposed_s[0] + 1e-9


def test_ring_placement_follows_the_rank_order() -> None:
    """§1.6: CP ranks follow TP, so c x t > node puts the ring across nodes."""
    assert ring_crosses_nodes(A([8, 4, 2]), A([2, 2, 2]), 8).tolist() == [True, False, False]
    assert cp_members_per_node(A([8, 4, 1]), A([2, 4, 16]), 8).tolist() == [1.0, 2.0, 8.0]


def test_kernel_parameters_are_validated() -> None:
    with pytest.raises(SpecError, match="sm_count"):
        AttentionKernel(
            peak_flop_per_s=1e15,
            fwd_plateau=0.6,
            bwd_plateau=0.5,
            fwd_half_keys=0.0,
            bwd_half_keys=0.0,
            sm_count=0,
        )
    with pytest.raises(SpecError, match="cp must be positive"):
        shape(4096, 0, 8, 1)


def test_dispatcher_places_each_variant_on_its_links() -> None:
    """cp_attention_time = the variant's function with the links of the rank order (§1.6)."""
    table = load_collective_table("h100-sxm-80gb")
    assert table is not None
    kernel = hopper_attention_prior(989.4e12, 132)
    sh = shape(131072, 16, 32, 32)  # t = 1, c = 16: two nodes of 8
    kw = {"table": table, "tp": A([1.0]), "gpus_per_node": 8, "nic_bytes_per_s": 50e9,
          "hbm_bytes_per_s": 2.7e12}  # fmt: skip
    hop_b, hop_h = group_params(table, "send_recv", A([2.0]), A([1.0]), 50e9)
    ring = ring_p2p(kernel, sh, p2p_beta_max=hop_b, p2p_s_half=hop_h, hbm_bytes_per_s=2.7e12)
    assert cp_attention_time("p2p", kernel, sh, **kw).total_s[0] == ring.total_s[0]  # type: ignore[arg-type]
    a2a_b, a2a_h = group_params(table, "all_to_all", A([16.0]), A([8.0]), 50e9)
    uly = ulysses_a2a(kernel, sh, a2a_beta_max=a2a_b, a2a_s_half=a2a_h)
    assert cp_attention_time("a2a", kernel, sh, **kw).total_s[0] == uly.total_s[0]  # type: ignore[arg-type]
    # the hierarchical form keeps its all-to-all inside the node and beats the flat ring
    hier = cp_attention_time("a2a+p2p", kernel, sh, **kw)  # type: ignore[arg-type]
    assert hier.total_s[0] < ring.total_s[0]
    assert np.isfinite(cp_attention_time("all_gather", kernel, sh, **kw).total_s[0])  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="cp_comm_type='ring'"):
        cp_attention_time("ring", kernel, sh, **kw)  # type: ignore[arg-type]


def test_ampere_prior_reproduces_the_flash_attention_2_figure() -> None:
    """performance-facts §2.1: FA2 causal d = 128 fwd + bwd on A100 at b x s = 16k, 16 heads
    (FA's FLOP count: 3.5 x forward)."""
    kernel = attention_kernel_prior(load_gpu("a100-sxm4-80gb"))
    assert kernel is not None and kernel.sm_count == 108
    for s, measured in ((1024, 133), (2048, 155), (4096, 173), (8192, 182), (16384, 189)):
        bh, kw = 16384 / s * 16, {"query_rows": A(float(s)), "pairs": A(s * s / 2.0)}
        fwd = attention_call_time(kernel, batch_heads=A(bh), head_dim=128, **kw)  # type: ignore[arg-type]
        bwd = attention_call_time(kernel, batch_heads=A(bh), head_dim=128, backward=True, **kw)  # type: ignore[arg-type]
        rate = 3.5 * 4.0 * bh * s * s / 2 * 128 / (fwd + bwd) / 1e12
        assert rate == pytest.approx(measured, rel=0.06)
    assert attention_kernel_prior(load_gpu("mi300x-192gb")) is None
    assert attention_kernel_prior(load_gpu("b200-sxm-180gb")) is not None
