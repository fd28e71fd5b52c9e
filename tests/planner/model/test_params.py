"""Parameter counts against Fujii §2 hand checks and Megatron's §8 test vectors."""

from __future__ import annotations

import pytest

from planner.model.flops import padded_vocab
from planner.model.params import param_counts
from planner.specs import ModelSpec
from tests.planner.fixtures import DEEPSEEK_V3


def llama(**overrides: object) -> ModelSpec:
    base: dict[str, object] = {
        "name": "llama3.1-8b",
        "num_layers": 32,
        "hidden_size": 4096,
        "ffn_hidden_size": 14336,
        "num_attention_heads": 32,
        "num_query_groups": 8,
        "vocab_size": 128256,
    }
    base.update(overrides)
    return ModelSpec(**base)  # type: ignore[arg-type]


MIXTRAL = llama(name="mixtral-like", vocab_size=32000, num_experts=8, moe_router_topk=2)


def test_llama31_8b_total_matches_fujii() -> None:
    assert param_counts(llama()).total == 8_030_261_248  # memory-estimator-fujii §2


def test_llama31_70b_total_matches_fujii() -> None:
    model = llama(num_layers=80, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64)
    assert param_counts(model).total == 70_553_706_496


def test_llama2_7b_mha_total_matches_fujii() -> None:
    model = llama(ffn_hidden_size=11008, num_query_groups=None, vocab_size=32000)
    assert param_counts(model).total == 6_738_415_616


def test_dense_model_active_equals_total() -> None:
    counts = param_counts(llama())
    assert counts.active == counts.total


def test_mixtral_total_and_active_match_megatron_vector_d() -> None:
    counts = param_counts(MIXTRAL)
    assert counts.total / 1e9 == pytest.approx(46.70, abs=0.005)  # megatron-facts §8 D
    assert counts.active / 1e9 == pytest.approx(12.88, abs=0.005)


def test_deepseek_block_and_total_match_megatron_vector_e() -> None:
    """Megatron omits the MTP eh-projection and its norms; we count them (mtp_extra)."""
    counts = param_counts(DEEPSEEK_V3)
    assert counts.decoder / 1e9 == pytest.approx(669.17, abs=0.005)  # megatron-facts §8 E
    megatron_total = counts.total - counts.mtp_num_layers * counts.mtp_extra
    assert megatron_total / 1e9 == pytest.approx(682.53, abs=0.005)
    assert counts.mtp_extra == 2 * 7168 * 7168 + 3 * 7168


def test_deepseek_active_counts_mtp_experts_at_top_k() -> None:
    """megatron-facts §4.1 review note: MTP at K gives 38.14 B, plus our MTP extras."""
    counts = param_counts(DEEPSEEK_V3)
    without_extras = counts.active - counts.mtp_extra
    assert without_extras / 1e9 == pytest.approx(38.14, abs=0.005)


def test_padded_vocab_changes_only_embeddings() -> None:
    model = llama()
    plain = param_counts(model)
    padded = param_counts(model, vocab_size=padded_vocab(model, 8))
    assert padded.total - plain.total == 2 * (129024 - 128256) * 4096


def test_linear_biases_are_counted() -> None:
    """Megatron's estimator ignores biases (§4.5); QKV (q + 2 kv), out h, FC1 2F, FC2 h."""
    plain = param_counts(llama()).dense_layer.total
    biased = param_counts(llama(add_bias_linear=True)).dense_layer.total
    assert biased - plain == (4096 + 2 * 1024) + 4096 + 2 * 14336 + 4096


def test_learned_position_table_is_counted() -> None:
    model = llama(position_embedding_type="learned_absolute", max_position_embeddings=2048)
    assert param_counts(model).position_embedding == 2048 * 4096


def test_tied_embeddings_have_no_output_layer() -> None:
    counts = param_counts(llama(untie_embeddings_and_output_weights=False))
    assert counts.output_layer == 0


def test_qk_layernorm_adds_replicated_norm_weights() -> None:
    layer = param_counts(llama(qk_layernorm=True)).dense_layer
    assert layer.attention_replicated == 2 * 128
