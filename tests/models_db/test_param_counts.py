"""Parameter counts of every catalog model against catalog-facts §1.8.

The counter below is written out in the test, independent of planner/model/params.py, following
§1.8's
conventions: every weight matrix, bias, norm weight and embedding; the learned position table
where there is one; the config vocabulary without Megatron's padding; active counts use the
top-k routed experts plus the shared expert. A wrong architecture number in a catalog file
(GQA groups, head dim, FFN size, gating, tying, experts, MLA ranks) moves these counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from models_db.catalog import list_models, load_model, model_metadata
from planner.specs import ModelSpec


@dataclass(frozen=True)
class Counts:
    total: int
    active: int
    embedding: int
    output_layer: int
    mtp_total: int
    mtp_active: int

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding - self.output_layer


def count_params(
    m: ModelSpec,
    *,
    extra_norms_per_layer: int = 0,
    attention_sinks: bool = False,
    router_bias: bool = False,
) -> Counts:
    h, a, vocab = m.hidden_size, m.num_attention_heads, m.vocab_size
    per_norm = 2 if m.normalization == "LayerNorm" else 1  # LayerNorm has a bias too
    if m.multi_latent_attention:
        assert m.kv_lora_rank and m.qk_head_dim and m.qk_pos_emb_head_dim and m.v_head_dim
        qk = m.qk_head_dim + m.qk_pos_emb_head_dim
        r_q, r_kv = m.q_lora_rank, m.kv_lora_rank
        q = h * r_q + r_q + r_q * a * qk if r_q else h * a * qk  # down, latent norm, up
        kv = h * (r_kv + m.qk_pos_emb_head_dim) + r_kv + r_kv * a * (m.qk_head_dim + m.v_head_dim)
        attn = q + kv + a * m.v_head_dim * h
    else:
        d = m.kv_channels or h // a
        g = m.num_query_groups or a
        attn = h * (a + 2 * g) * d + a * d * h
        if m.add_bias_linear or m.add_qkv_bias:
            attn += (a + 2 * g) * d
        if m.add_bias_linear:
            attn += h
        if m.qk_layernorm:
            attn += 2 * d
        if attention_sinks:
            attn += a
    norms = (2 + extra_norms_per_layer) * h * per_norm
    mats = 3 if m.swiglu or m.quick_geglu else 2  # gated MLPs have three matrices

    def mlp(f: int) -> int:
        p = mats * h * f
        if m.add_bias_linear:
            p += (mats - 1) * f + h
        return p

    dense_layer = attn + norms + mlp(m.ffn_hidden_size)
    moe_total = moe_active = 0
    if m.is_moe:
        e = m.num_experts or 0
        router = h * e + (e if router_bias else 0)
        shared = mlp(m.shared_expert_ffn_hidden_size) if m.shared_expert_ffn_hidden_size else 0
        base = attn + norms + router + shared
        moe_total = base + e * mlp(m.expert_ffn_hidden_size)
        moe_active = base + m.moe_router_topk * mlp(m.expert_ffn_hidden_size)
    positions = h * (m.max_position_embeddings or 0)
    embedding = vocab * h + (positions if m.position_embedding_type == "learned_absolute" else 0)
    output_layer = vocab * h if m.untie_embeddings_and_output_weights else 0
    final_norm = h * per_norm
    shared_parts = embedding + output_layer + final_norm
    total = m.num_dense_layers * dense_layer + m.num_moe_layers * moe_total + shared_parts
    active = m.num_dense_layers * dense_layer + m.num_moe_layers * moe_active + shared_parts
    # DeepSeek-V3 MTP module: enorm + hnorm, eh_proj (2h x h), one MoE layer, its final norm.
    mtp_extra = 2 * h * per_norm + 2 * h * h + h * per_norm
    return Counts(
        total=total,
        active=active,
        embedding=embedding,
        output_layer=output_layer,
        mtp_total=m.mtp_num_layers * (moe_total + mtp_extra),
        mtp_active=m.mtp_num_layers * (moe_active + mtp_extra),
    )


def counts_for(slug: str) -> Counts:
    # Grok-1 has four RMSNorms per layer (catalog-facts §1.7) and GPT-OSS a router bias (§1.4):
    # details a ModelSpec does not carry. GPT-OSS's sinks (§1.6) are its softmax_type.
    model = load_model(slug)
    return count_params(
        model,
        extra_norms_per_layer=2 if slug == "grok-1" else 0,
        attention_sinks=model.softmax_type == "learnable",
        router_bias=slug == "gpt-oss-120b",
    )


# catalog-facts §1.8 "computed" column, in billions (3 decimals): exact test vectors.
COMPUTED_TOTAL_B = {
    "gpt3-175b": 174.604,
    "llama2-7b": 6.738,
    "llama2-13b": 13.016,
    "llama2-70b": 68.977,
    "llama3.1-8b": 8.030,
    "llama3.1-70b": 70.554,
    "llama3.1-405b": 405.853,
    "mixtral-8x7b": 46.703,
    "mixtral-8x22b": 140.621,
    "grok-1": 315.685,
    "nemotron-4-15b": 15.629,
    "nemotron-4-340b": 341.029,
    "qwen3-30b-a3b": 30.532,
    "qwen3-235b-a22b": 235.094,
    "deepseek-v3": 671.026,
    "gpt-oss-120b": 116.829,
}
COMPUTED_ACTIVE_B = {
    "mixtral-8x7b": 12.880,
    "mixtral-8x22b": 39.152,
    "grok-1": 83.757,
    "qwen3-30b-a3b": 3.353,
    "qwen3-235b-a22b": 22.191,
    "deepseek-v3": 37.552,
    "gpt-oss-120b": 5.712,
}
HALF_A_MILLION = 0.5e6 + 1e3  # the sheet rounds to 0.001 B


def test_every_catalog_model_has_a_computed_vector() -> None:
    assert sorted(COMPUTED_TOTAL_B) == list_models()


@pytest.mark.parametrize("slug", sorted(COMPUTED_TOTAL_B))
def test_total_matches_sheet_computed_count(slug: str) -> None:
    assert counts_for(slug).total == pytest.approx(COMPUTED_TOTAL_B[slug] * 1e9, abs=HALF_A_MILLION)


@pytest.mark.parametrize("slug", sorted(COMPUTED_ACTIVE_B))
def test_active_matches_sheet_computed_count(slug: str) -> None:
    assert counts_for(slug).active == pytest.approx(
        COMPUTED_ACTIVE_B[slug] * 1e9, abs=HALF_A_MILLION
    )


@pytest.mark.parametrize(
    ("slug", "embedding_b", "non_embedding_b"),
    [
        # untied: embedding + output layer together, as the sheet splits them
        ("nemotron-4-15b", 3.146, 12.483),
        ("nemotron-4-340b", 9.437, 331.592),
        ("qwen3-30b-a3b", 0.622, 29.910),
        ("qwen3-235b-a22b", 1.245, 233.849),
        ("gpt-oss-120b", 1.158, 115.671),
    ],
)
def test_embedding_split_matches_sheet(
    slug: str, embedding_b: float, non_embedding_b: float
) -> None:
    c = counts_for(slug)
    assert c.embedding + c.output_layer == pytest.approx(embedding_b * 1e9, abs=HALF_A_MILLION)
    assert c.non_embedding == pytest.approx(non_embedding_b * 1e9, abs=HALF_A_MILLION)


def test_deepseek_v3_mtp_module_matches_sheet() -> None:
    c = counts_for("deepseek-v3")
    assert c.mtp_total == pytest.approx(11.610e9, abs=HALF_A_MILLION)
    # MTP active 2.541B includes the shared embedding and output head (catalog-facts §1.8)
    assert c.mtp_active + c.embedding + c.output_layer == pytest.approx(2.541e9, abs=HALF_A_MILLION)


def test_gpt_oss_published_active_excludes_input_embedding() -> None:
    c = counts_for("gpt-oss-120b")
    assert c.active - c.embedding == pytest.approx(5.133e9, abs=HALF_A_MILLION)


# Published figures are sanity bounds of a few percent (catalog-facts §1.8): names round
# (Llama 2 7B is 6.74B, Nemotron-4 15B is 15.6B), so allow 5 %.
@pytest.mark.parametrize("slug", sorted(COMPUTED_TOTAL_B))
def test_total_is_within_five_percent_of_published(slug: str) -> None:
    published = model_metadata(slug)["published_params"]["total"]
    assert counts_for(slug).total == pytest.approx(published, rel=0.05)


@pytest.mark.parametrize(
    "slug", ["mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"]
)
def test_active_is_within_five_percent_of_published(slug: str) -> None:
    published = model_metadata(slug)["published_params"]["active"]
    assert counts_for(slug).active == pytest.approx(published, rel=0.05)


def test_deepseek_v3_with_mtp_matches_huggingface_685b() -> None:
    c = counts_for("deepseek-v3")
    published = model_metadata("deepseek-v3")["published_params"]["total_with_mtp"]
    assert c.total + c.mtp_total == pytest.approx(published, rel=0.01)
