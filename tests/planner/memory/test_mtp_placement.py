"""Memory of the MTP block where the pipeline layout puts it (megatron-facts §1.2 layout letters,
mechanisms-facts §5.1, §7): its weights, gradients, optimizer state and activations on the rank
of the 'm' stage, with a copy of the word embedding there; its output heads' logits on the loss
rank. And Megatron's own DeepSeek-V3 vector (megatron-facts §8 E) from our parameter counts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.layouts import LayoutBatch
from planner.memory.estimate import MemoryEstimate, estimate_memory
from planner.model.flops import padded_vocab
from planner.model.params import ParamCounts, param_counts
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import DEEPSEEK_V3, H100, LLAMA_8B, MIXTRAL_8X7B

MTP_MOE = replace(MIXTRAL_8X7B, name="mixtral-mtp", mtp_num_layers=1)  # every layer MoE
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
JOB = TrainingJob(seq_length=4096, global_batch_size=256)
# 4 virtual stages on 2 ranks: the 'm' stage is virtual stage 2 (rank 0) or stage 3 (rank 1)
ON_RANK_0 = Layout(pp=2, vpp=2, ep=8, dp=32, pipeline_layout="Et*8|t*8|t*16m|L")
ON_LAST = replace(ON_RANK_0, pipeline_layout="Et*8|t*8|t*16|mL")
NO_MTP = replace(ON_RANK_0, pipeline_layout="Et*8|t*8|t*16|L")


def _estimate(model: ModelSpec, layouts: list[Layout]) -> MemoryEstimate:
    return estimate_memory(model, CLUSTER, JOB, LayoutBatch.from_layouts(layouts))


def _counts(model: ModelSpec, tp: int = 1) -> ParamCounts:
    return param_counts(model, vocab_size=padded_vocab(model, np.array([tp]))[0])


def _mtp_block_per_gpu(counts: ParamCounts, *, ep: int) -> tuple[float, float]:
    """(dense, expert) parameters of the MTP block on one GPU at tp = etp = 1."""
    layer = counts.mtp_layer
    return float(layer.tp_sharded + layer.replicated + counts.mtp_extra), float(
        layer.routed_experts / ep
    )


def test_the_mtp_block_is_charged_to_the_rank_of_the_m_stage() -> None:
    mtp = _estimate(MTP_MOE, [ON_RANK_0, ON_LAST])
    plain = _estimate(replace(MTP_MOE, mtp_num_layers=0), [NO_MTP])
    dense, expert = _mtp_block_per_gpu(_counts(MTP_MOE), ep=8)
    sp, base = mtp.stage_params, plain.stage_params
    # 'm' on rank 0 (which holds 'E'): the block there, nothing on the last rank
    assert sp["first_dense"][0] - base["first_dense"][0] == pytest.approx(dense)
    assert sp["first_expert"][0] - base["first_expert"][0] == pytest.approx(expert)
    assert sp["last_dense"][0] == pytest.approx(base["last_dense"][0])
    assert sp["last_expert"][0] == pytest.approx(base["last_expert"][0])
    # its activations follow it: rank 0 holds more, the last rank none of the MTP layer's
    first, last = mtp.first_stage_terms, mtp.last_stage_terms
    assert first["activations_bytes"][0] > first["activations_bytes"][1]
    assert last["activations_bytes"][0] == pytest.approx(
        plain.last_stage_terms["activations_bytes"][0]
    )
    assert last["activations_bytes"][1] > last["activations_bytes"][0]


def test_the_mtp_rank_keeps_its_own_copy_of_the_word_embedding() -> None:
    # catalog-facts §1.5: the MTP module embeds its tokens with the main model's embedding; a
    # rank without 'E' keeps a copy (V h / t), as the loss rank keeps the tied output copy
    mtp = _estimate(MTP_MOE, [ON_LAST])
    plain = _estimate(replace(MTP_MOE, mtp_num_layers=0), [NO_MTP])
    counts = _counts(MTP_MOE)
    dense, _ = _mtp_block_per_gpu(counts, ep=8)
    word = counts.vocab_size * MTP_MOE.hidden_size
    extra = mtp.stage_params["last_dense"][0] - plain.stage_params["last_dense"][0]
    assert extra == pytest.approx(dense + word)


def test_with_tied_weights_the_loss_ranks_copy_serves_the_mtp_layers() -> None:
    tied = replace(MTP_MOE, untie_embeddings_and_output_weights=False)
    mtp = _estimate(tied, [ON_LAST])
    plain = _estimate(replace(tied, mtp_num_layers=0), [NO_MTP])
    dense, _ = _mtp_block_per_gpu(_counts(tied), ep=8)
    extra = mtp.stage_params["last_dense"][0] - plain.stage_params["last_dense"][0]
    assert extra == pytest.approx(dense)


def test_without_a_layout_the_last_rank_holds_the_block_and_the_embedding_copy() -> None:
    lay = Layout(pp=2, ep=8, dp=32)
    mtp = _estimate(MTP_MOE, [lay])
    plain = _estimate(replace(MTP_MOE, mtp_num_layers=0), [lay])
    counts = _counts(MTP_MOE)
    dense, expert = _mtp_block_per_gpu(counts, ep=8)
    word = counts.vocab_size * MTP_MOE.hidden_size
    sp, base = mtp.stage_params, plain.stage_params
    assert sp["last_dense"][0] - base["last_dense"][0] == pytest.approx(dense + word)
    assert sp["last_expert"][0] - base["last_expert"][0] == pytest.approx(expert)
    assert sp["first_dense"][0] == pytest.approx(base["first_dense"][0])
    # pp = 1: the one rank holds 'E', so no copy
    single = Layout(ep=8, dp=64)
    one = _estimate(MTP_MOE, [single]).stage_params["first_dense"][0]
    none = _estimate(replace(MTP_MOE, mtp_num_layers=0), [single]).stage_params["first_dense"][0]
    assert one - none == pytest.approx(dense)


def test_the_mtp_heads_logits_stay_on_the_loss_rank() -> None:
    # mechanisms-facts §5.1: the 'L' stage runs the output layer and the loss, once per MTP
    # depth too; an 'm' stage elsewhere moves the layer, not its logits
    mtp = _estimate(MTP_MOE, [ON_RANK_0, ON_LAST])
    plain = _estimate(replace(MTP_MOE, mtp_num_layers=0), [NO_MTP])
    assert mtp.first_stage_terms["logits_bytes"].tolist() == [0.0, 0.0]
    # one more fp32 head of s b V / t on the loss rank (planner.memory.activations.logits_bytes)
    head = 4.0 * JOB.seq_length * _counts(MTP_MOE).vocab_size
    extra = mtp.last_stage_terms["logits_bytes"] - plain.last_stage_terms["logits_bytes"][0]
    assert extra.tolist() == pytest.approx([head, head])


def test_megatron_vector_e_most_loaded_shard_from_our_counts() -> None:
    """megatron-facts §8 E (t=2, p=8, e=64, d_e=1): 2.9948 B parameters and 34319.74 MiB of
    weights + optimizer, by §4.2's conventions: L/p layers, the whole MTP layer (without the
    eh-projection and its norms, §4.1) and the embedding on one shard, MLA's down-projections
    counted TP-sharded; dense state at 6 + 12/32 B, expert state at 6 + 12/1 B (§4.3)."""
    c = _counts(DEEPSEEK_V3, tp=2)
    t, p, e, h = 2, 8, 64, DEEPSEEK_V3.hidden_size
    d, m, x = c.dense_layer, c.moe_layer, c.mtp_layer
    n_dense, n_moe = c.num_dense_layers, c.num_moe_layers
    tp_part = (
        ((d.attention + d.mlp) * n_dense + (m.attention + m.shared_experts) * n_moe) / p
        + x.attention + x.shared_experts + x.mlp + h * c.vocab_size
    ) / t  # fmt: skip
    replicated = (d.norms * n_dense + (m.norms + m.router) * n_moe + c.final_norm) / p
    replicated += x.norms + x.router
    experts = (m.routed_experts * n_moe / p + x.routed_experts) / e
    assert (tp_part + replicated + experts) / 1e9 == pytest.approx(2.9948, abs=5e-5)
    mib = ((tp_part + replicated) * (6 + 12 / 32) + experts * (6 + 12 / 1)) / 2**20
    assert mib == pytest.approx(34319.74, abs=0.01)


def test_with_interleaving_the_mtp_layer_holds_one_micro_batch_on_the_last_rank() -> None:
    # rank p-1 warms up (v-1)p + 1 chunks, p in each earlier chunk and 1 in its last, where the
    # MTP layers sit (megatron-facts §3.3): one micro-batch of them, as without interleaving
    dense = replace(LLAMA_8B, name="llama-mtp", mtp_num_layers=1)
    lays = [Layout(pp=4, dp=16, tp=1), Layout(pp=4, vpp=2, dp=16, tp=1)]
    mtp = _estimate(dense, lays).last_stage_terms["activations_bytes"]
    plain = _estimate(replace(dense, mtp_num_layers=0), lays).last_stage_terms["activations_bytes"]
    extra = mtp - plain
    assert extra[0] > 0
    assert extra[1] == pytest.approx(extra[0], rel=1e-12)
