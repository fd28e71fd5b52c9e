"""MoE activations by the stack's permutation: before memory-efficient token permutation
(mechanisms-facts §6.3: "Before core 0.13 the unpermute multiplied by probs and saved the expert
output (K h 2 B per token) as well") the estimate keeps one more bf16 hidden vector per routed
copy; without --moe-permute-fusion (core < 0.11 or TE < 1.11, §8) it keeps no row_id_map (§4.4)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.layouts import FloatArray, LayoutBatch
from planner.memory.activations import ActivationShape, layer_activations, routed_tokens
from planner.memory.estimate import estimate_memory
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64, gpus_per_node=8)


def _job(core: str) -> TrainingJob:
    return TrainingJob(seq_length=4096, global_batch_size=256, megatron_core_version=core)


def test_the_saved_expert_output_is_k_h_2_bytes_per_token() -> None:
    batch = LayoutBatch.from_layouts([Layout(tp=1, ep=8, dp=64)])
    shape = ActivationShape.of(4096, batch)
    kw = {"moe": True, "swiglu_fused": True, "flash_attention": True, "moe_imbalance": 1.2}
    new = layer_activations(MIXTRAL_8X7B, shape, **kw)  # type: ignore[arg-type]
    old = layer_activations(MIXTRAL_8X7B, shape, expert_output_saved=True, **kw)  # type: ignore[arg-type]
    copies = routed_tokens(MIXTRAL_8X7B, shape, 1.2)  # K copies per token on the expert rank
    h = MIXTRAL_8X7B.hidden_size
    assert old.mlp - new.mlp == pytest.approx(2.0 * h * copies)


def test_core_0_12_estimates_more_moe_activations_than_0_13_and_dense_alike() -> None:
    moe = LayoutBatch.from_layouts([Layout(tp=1, pp=2, ep=8, dp=32)])
    before = estimate_memory(MIXTRAL_8X7B, CLUSTER, _job("0.12"), moe).terms["activations_bytes"]
    after = estimate_memory(MIXTRAL_8X7B, CLUSTER, _job("0.13"), moe).terms["activations_bytes"]
    assert np.all(before > after)
    dense = LayoutBatch.from_layouts([Layout(tp=2, pp=2, dp=16)])
    d_before = estimate_memory(LLAMA_8B, CLUSTER, _job("0.12"), dense).terms["activations_bytes"]
    d_after = estimate_memory(LLAMA_8B, CLUSTER, _job("0.13"), dense).terms["activations_bytes"]
    assert np.array_equal(d_before, d_after)


def test_the_unfused_permute_keeps_no_row_id_map() -> None:
    # mechanisms-facts §4.4: the fused permute's int32 row_id_map is T x (2E + 1), (8E + 4) B per
    # token; the unfused permute (no --moe-permute-fusion, core < 0.11) does not build it
    batch = LayoutBatch.from_layouts([Layout(tp=2, ep=8, dp=32, sequence_parallel=True)])
    shape = ActivationShape.of(4096, batch)
    kw = {"moe": True, "swiglu_fused": True, "flash_attention": True, "moe_imbalance": 1.0}
    fused = layer_activations(MIXTRAL_8X7B, shape, **kw)  # type: ignore[arg-type]
    unfused = layer_activations(MIXTRAL_8X7B, shape, permute_fused=False, **kw)  # type: ignore[arg-type]
    experts = MIXTRAL_8X7B.num_experts or 1
    per_rank_tokens = shape.tokens / shape.sp_shard  # SP: the MoE block sees s/(c t) tokens
    assert fused.mlp - unfused.mlp == pytest.approx((8 * experts + 4) * per_rank_tokens)
    assert np.array_equal(fused.attention, unfused.attention)


def _activations(model: ModelSpec, batch: LayoutBatch, core: str, te: str) -> FloatArray:
    job = TrainingJob(
        seq_length=4096, global_batch_size=256, megatron_core_version=core, te_version=te
    )
    terms: FloatArray = estimate_memory(model, CLUSTER, job, batch).terms["activations_bytes"]
    return terms


def test_a_stack_without_permute_fusion_estimates_less_moe_memory_and_dense_alike() -> None:
    moe = LayoutBatch.from_layouts([Layout(tp=1, pp=2, ep=8, dp=32)])
    fused = _activations(MIXTRAL_8X7B, moe, "0.11", "1.11")
    assert np.all(_activations(MIXTRAL_8X7B, moe, "0.10", "1.11") < fused)  # core < 0.11
    assert np.all(_activations(MIXTRAL_8X7B, moe, "0.11", "1.10") < fused)  # TE < 1.11
    dense = LayoutBatch.from_layouts([Layout(tp=2, pp=2, dp=16)])
    before = _activations(LLAMA_8B, dense, "0.10", "1.11")
    assert np.array_equal(before, _activations(LLAMA_8B, dense, "0.11", "1.11"))
