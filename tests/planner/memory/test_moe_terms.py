"""MoE memory terms, each against a hand computation from the facts sheets' shapes.

Mixtral-8x7B: h 4096, F_e 14336, E 8, K 2, 32 MoE layers. DeepSeek-V3: h 7168, F_e = F_s = 2048,
E 256, K 8, MLA with q_lora 1536, kv_lora 512, 128 heads, d_v 128. s = 4096, b = 1, t = 1.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planner.layouts import LayoutBatch
from planner.memory.activations import ActivationShape, layer_activations
from planner.memory.buffers import allocated_bytes
from planner.memory.estimate import MemoryEstimate, MemoryOptions, estimate_memory
from planner.memory.fp8_saved import attention_fp8_saving, fp8_saving
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import DEEPSEEK_V3, MIXTRAL_8X7B
from tests.planner.memory.test_estimate import GPU

JOB = TrainingJob(seq_length=4096, global_batch_size=64)
CLUSTER = ClusterSpec(name="test", gpu=GPU, num_gpus=64)
TOKENS = 4096
# one routed copy in bf16: FC1 input 2h + prob 4 B + FC1 output 4F_e + FC2 input 2F_e (§6.3)
MIXTRAL_COPY = 2 * 4096 + 4 + 6 * 14336


def _estimate(layouts: list[Layout], job: TrainingJob = JOB, **kw: Any) -> MemoryEstimate:
    model = kw.pop("model", MIXTRAL_8X7B)
    return estimate_memory(model, CLUSTER, job, LayoutBatch.from_layouts(layouts), **kw)


def _shape(layout: Layout | None = None) -> tuple[LayoutBatch, ActivationShape]:
    batch = LayoutBatch.from_layouts([layout or Layout()])
    return batch, ActivationShape.of(TOKENS, batch)


def test_routed_activations_follow_the_jobs_imbalance() -> None:
    lay = [Layout(ep=8, dp=8, moe_a2a_overlap=False)]
    balanced = _estimate(lay, replace(JOB, moe_imbalance=1.0)).terms["activations_bytes"][0]
    skewed = _estimate(lay, replace(JOB, moe_imbalance=1.2)).terms["activations_bytes"][0]
    # 32 MoE layers x 1 micro-batch x 0.2 more of 4096 tokens x K 2 copies
    assert skewed - balanced == pytest.approx(32 * 0.2 * TOKENS * 2 * MIXTRAL_COPY)
    pinned = _estimate(lay, replace(JOB, moe_imbalance=1.0), options=MemoryOptions(
        moe_token_imbalance=1.2)).terms["activations_bytes"][0]  # fmt: skip
    assert pinned == pytest.approx(skewed)  # an explicit option still overrides the job


def test_moe_block_keeps_norms_router_permute_map_and_routed_copies() -> None:
    _, shape = _shape()
    acts = layer_activations(
        MIXTRAL_8X7B, shape, moe=True, swiglu_fused=True, flash_attention=True, moe_imbalance=1.0
    )
    # norm input + router input 2 x 2h, fp32 logits and probs 2 x 4E, int32 row_id_map
    # (8E + 4) (mechanisms-facts §4.4), K routed copies
    per_token = 2 * 2 * 4096 + 2 * 4 * 8 + (8 * 8 + 4) + 2 * MIXTRAL_COPY
    assert float(acts.mlp[0]) / TOKENS == pytest.approx(per_token)


def test_fp8_in_an_mla_moe_layer_counts_each_module() -> None:
    batch, shape = _shape(Layout(ep=8, dp=8))
    saving = float(fp8_saving(DEEPSEEK_V3, shape, batch, moe=True, imbalance=1.0)[0])
    routed = 8 * (7168 + 2048)  # FC1 input h and FC2 input F_e per copy (§6.3)
    shared = 2048 - 7168  # FC2 input F_s saved, fp8 copy of the router's bf16 input costs h
    attention = (1536 + 512) - 128 * 128  # latents saved, proj's fp8 copy of O costs a d_v
    assert saving / TOKENS == pytest.approx(routed + shared + attention)  # 54 272 B


def test_fp8_attention_is_neutral_for_gqa_with_sequence_parallel() -> None:
    # QKV norm output h/t saved against proj's fp8 copy of O, a d / t = h / t (§6.2: 11h + ...)
    _, shape = _shape(Layout(tp=4, dp=2))
    assert float(attention_fp8_saving(MIXTRAL_8X7B, shape)[0]) == pytest.approx(0.0)


def test_fp8_saves_nothing_more_in_a_recomputed_moe_block_but_attention_still_counts() -> None:
    lay = Layout(ep=8, dp=8, recompute="selective", recompute_modules=("moe",))
    batch, shape = _shape(lay)
    saving = fp8_saving(DEEPSEEK_V3, shape, batch, moe=True, imbalance=1.0)
    assert float(saving[0]) / TOKENS == pytest.approx((1536 + 512) - 128 * 128)
    full_batch, full_shape = _shape(Layout(ep=8, dp=8, recompute="full"))
    full = fp8_saving(DEEPSEEK_V3, full_shape, full_batch, moe=True, imbalance=1.0)
    assert float(full[0]) == 0.0


def test_moe_act_recompute_leaves_the_fp8_fc1_input_saving() -> None:
    lay = Layout(ep=8, dp=8, recompute="selective", recompute_modules=("moe_act",))
    batch, shape = _shape(lay)
    saving = float(fp8_saving(DEEPSEEK_V3, shape, batch, moe=True, imbalance=1.0)[0])
    assert saving / TOKENS == pytest.approx(8 * 7168 + (2048 - 7168) + (2048 - 128 * 128))


def test_a2a_overlap_holds_one_more_layer_not_one_more_micro_batch() -> None:
    _, shape = _shape()
    layer = layer_activations(
        MIXTRAL_8X7B, shape, moe=True, swiglu_fused=True, flash_attention=True, moe_imbalance=1.2
    ).full
    for base in (Layout(ep=8, dp=8), Layout(pp=2, vpp=2, ep=8, dp=4)):
        lays = [replace(base, moe_a2a_overlap=v) for v in (False, True)]
        off, on = _estimate(lays).first_stage_terms["activations_bytes"]
        assert on - off == pytest.approx(float(layer[0]))


def test_flex_dispatch_chosen_by_auto_holds_deepep_buffers() -> None:
    nodes = replace(CLUSTER, gpus_per_node=8)
    lays = [Layout(ep=16, dp=16, moe_dispatcher=d) for d in (None, "flex")]
    est = estimate_memory(MIXTRAL_8X7B, nodes, JOB, LayoutBatch.from_layouts(lays))
    comm = est.terms["comm_buffers_bytes"]
    assert comm[0] == comm[1]  # ep 16 spans two nodes: the planner emits flex (comm_flags)


def test_alltoall_holds_two_routed_copies_flex_one() -> None:
    lays = [Layout(ep=8, dp=8, moe_dispatcher=d) for d in ("alltoall", "flex")]
    comm = _estimate(lays, replace(JOB, moe_imbalance=1.0)).terms["comm_buffers_bytes"]
    copy = TOKENS * 2 * 4096 * 2.0  # 4096 tokens x K 2 x h x bf16
    assert comm[0] - comm[1] == pytest.approx(copy - MemoryOptions().deepep_buffer_bytes)


def test_allocated_leaves_out_fragmentation_context_and_nccl() -> None:
    opts = MemoryOptions()
    est = _estimate([Layout(ep=8, dp=8)], options=opts)
    terms = est.terms
    nccl = (
        terms["runtime_overhead_bytes"][0] - opts.cuda_context_bytes - opts.library_workspace_bytes
    )
    expected = est.total_bytes[0] - terms["fragmentation_bytes"][0] - opts.cuda_context_bytes - nccl
    assert float(allocated_bytes(terms, opts)[0]) == pytest.approx(float(expected))
    assert nccl == pytest.approx(opts.nccl_bytes_per_communicator * 2)  # DP and EP (expert DP 1)
