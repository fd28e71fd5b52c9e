"""CP attention memory by ``--cp-comm-type`` (issue 12 item 4): all_gather holds the full-sequence
K and V and their gradients (mechanisms-facts §1.3); p2p's forward holds every step's partial
output and LSE (§1.2), a forward transient that counts where it exceeds the backward workspace;
a2a holds the same elements as p2p's saved tensors (§1.4); the search's choice keeps all_gather
only where the layout still fits."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from planner.layouts import CP_COMM_AUTO, LayoutBatch
from planner.memory.context_parallel import (
    cp_attention_transient_bytes,
    cp_forward_partials_bytes,
    cp_peak_workspace,
)
from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.search import cp_choice
from planner.specs import CP_COMM_TYPES, ClusterSpec, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, LLAMA_70B

MIB = 2.0**20
P2P, ALL_GATHER, A2A = (CP_COMM_TYPES.index(x) for x in ("p2p", "all_gather", "a2a"))
CLUSTER = ClusterSpec(name="t", gpu=H100, num_gpus=64)


def one(tp: int, cp: int, code: int, b: int = 1, dp: int = 1) -> LayoutBatch:
    return LayoutBatch.from_columns(
        tp=[tp], cp=[cp], dp=[dp], micro_batch_size=[b], cp_comm_type=[code]
    )


def test_all_gather_holds_full_sequence_kv_and_its_gradients_70b() -> None:
    # Llama 70B: 8 KV heads, d = 128; tp = 8 leaves g_l = 1. s = 128 K, b = 1:
    # K + V of the whole sequence = 2 B x 131072 x (128 + 128) = 64 MiB; with dK + dV 128 MiB
    got = cp_attention_transient_bytes(LLAMA_70B, 131072, one(8, 8, ALL_GATHER))
    assert got[0] == 128 * MIB


def test_all_gather_scales_with_kv_heads_and_micro_batch_8b() -> None:
    # Llama 8B, tp = 1: g_l = 8 KV heads of 128; s = 32 K, b = 2:
    # 2 (gradients) x 2 B x 2 x 32768 x (1024 + 1024) = 512 MiB
    got = cp_attention_transient_bytes(LLAMA_8B, 32768, one(1, 4, ALL_GATHER, b=2))
    assert got[0] == 512 * MIB


@pytest.mark.parametrize("code", [P2P, A2A, CP_COMM_AUTO])
def test_the_other_types_hold_nothing_more_in_backward(code: int) -> None:
    assert cp_attention_transient_bytes(LLAMA_8B, 32768, one(1, 4, code))[0] == 0.0


@pytest.mark.parametrize("code", [P2P, CP_COMM_AUTO])
def test_p2p_holds_every_steps_partial_output_and_lse_70b(code: int) -> None:
    # Llama 70B, tp = 8: a_l = 8 heads of d = 128; s = 128 K, b = 1, c = 8: c steps of s/c rows
    # = 131072 x 8 rows, each 128 x 2 B (bf16 output) + 4 B (fp32 LSE) = 260 MiB
    got = cp_forward_partials_bytes(LLAMA_70B, 131072, one(8, 8, code))
    assert got[0] == 260 * MIB
    assert cp_forward_partials_bytes(LLAMA_70B, 131072, one(8, 8, code, b=2))[0] == 520 * MIB


@pytest.mark.parametrize("code", [ALL_GATHER, A2A])
def test_only_the_ring_keeps_partial_outputs(code: int) -> None:
    assert cp_forward_partials_bytes(LLAMA_70B, 131072, one(8, 8, code))[0] == 0.0
    assert cp_forward_partials_bytes(LLAMA_70B, 131072, one(8, 1, P2P))[0] == 0.0


def test_the_peak_is_the_larger_of_the_forward_partials_and_the_backward() -> None:
    ring, gather = one(8, 8, P2P), one(8, 8, ALL_GATHER)
    small, large = np.array([100 * MIB]), np.array([1024 * MIB])
    assert cp_peak_workspace(small, LLAMA_70B, 131072, ring)[0] == 260 * MIB
    assert cp_peak_workspace(large, LLAMA_70B, 131072, ring)[0] == 1024 * MIB
    # all_gather: no partials (its gathered K/V and dK/dV are part of the backward workspace)
    assert cp_peak_workspace(small, LLAMA_70B, 131072, gather)[0] == 100 * MIB


def test_very_long_sequences_charge_the_partials_in_the_estimate() -> None:
    # Llama 8B, tp = 1, cp = 32, s = 1 M: partials 1 Mi rows x 32 heads x 260 B = 8.1 GiB,
    # more than the backward workspace of 32 K local tokens (2 B x 32768 x 3 x 14336 = 2.6 GiB)
    job = TrainingJob(seq_length=2**20, global_batch_size=2)
    batch = LayoutBatch.from_columns(tp=[1] * 2, cp=[32] * 2, dp=[2] * 2, cp_comm_type=[P2P, A2A])
    est = estimate_memory(LLAMA_8B, CLUSTER, job, batch, MemoryOptions())
    partials = cp_forward_partials_bytes(LLAMA_8B, 2**20, batch)[0]
    assert partials == 2**20 * 32 * 260
    assert est.terms["workspace_bytes"][0] == pytest.approx(partials)
    assert est.terms["workspace_bytes"][1] < partials


def test_cp_1_holds_nothing_whatever_the_type() -> None:
    assert cp_attention_transient_bytes(LLAMA_8B, 32768, one(1, 1, ALL_GATHER))[0] == 0.0


def test_the_estimate_adds_it_to_the_workspace_and_nothing_else() -> None:
    # Llama 8B, tp = 2 (g_l = 4), cp = 8, s = 64 K: 2 x 2 B x 65536 x (512 + 512) = 256 MiB
    job = TrainingJob(seq_length=65536, global_batch_size=8)
    codes = [P2P, ALL_GATHER, A2A]
    batch = LayoutBatch.from_columns(tp=[2] * 3, cp=[8] * 3, dp=[4] * 3, cp_comm_type=codes)
    est = estimate_memory(LLAMA_8B, CLUSTER, job, batch, MemoryOptions())
    assert est.fits.all()
    extra = est.total_bytes[1] - est.total_bytes[0]
    assert extra >= 256 * MIB  # plus the fragmentation that grows with the step's memory
    assert est.terms["workspace_bytes"][1] - est.terms["workspace_bytes"][0] == pytest.approx(
        256 * MIB
    )
    # a2a: same elements, head-split (§1.4); p2p's partials (256 + 4 MiB at a_l = 16) stay
    # below this layer's backward workspace, so they do not raise the peak here
    assert est.total_bytes[2] == est.total_bytes[0]


def _fake_ring(cheapest: int) -> Any:
    """A ring model whose attention time makes ``cheapest`` the fastest CP type."""

    def ring_model(ctx: Any) -> Any:
        codes = ctx.batch.cp_comm_codes
        return SimpleNamespace(total_s=np.where(codes == cheapest, 0.5, 1.0))

    return ring_model


def test_the_choice_keeps_all_gather_only_where_it_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cp_choice, "ring_model", _fake_ring(ALL_GATHER))
    job = TrainingJob(seq_length=65536, global_batch_size=8)
    batch = one(2, 8, CP_COMM_AUTO, dp=4)
    p2p = estimate_memory(LLAMA_8B, CLUSTER, job, replace(batch, cp_comm_type=np.array([P2P])))
    capacity = float(p2p.capacity_bytes)
    roomy = MemoryOptions(threshold=(float(p2p.total_bytes[0]) + 512 * MIB) / capacity)
    tight = MemoryOptions(threshold=(float(p2p.total_bytes[0]) + 128 * MIB) / capacity)
    chosen = cp_choice.choose_cp_comm(LLAMA_8B, CLUSTER, job, batch, roomy)
    assert chosen.cp_comm_codes.tolist() == [ALL_GATHER]  # 256 MiB more still fits
    chosen = cp_choice.choose_cp_comm(LLAMA_8B, CLUSTER, job, batch, tight)
    assert chosen.cp_comm_codes.tolist() == [P2P]  # the next fastest (all others tie at 1.0)
    # without memory options the speed alone decides
    chosen = cp_choice.choose_cp_comm(LLAMA_8B, CLUSTER, job, batch)
    assert chosen.cp_comm_codes.tolist() == [ALL_GATHER]
