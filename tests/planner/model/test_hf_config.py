"""planner.model.hf_config: Hugging Face config.json -> ModelSpec, one mapping rule per test."""

from __future__ import annotations

from typing import Any

import pytest

from planner.model.hf_config import SUPPORTED_MODEL_TYPES, model_from_hf_config
from planner.specs import SpecError


def llama(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "vocab_size": 128256, "max_position_embeddings": 8192, "hidden_act": "silu",
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
    }  # fmt: skip
    return base | overrides


def qwen_moe(model_type: str, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model_type": model_type, "hidden_size": 2048, "intermediate_size": 5632,
        "num_attention_heads": 16, "num_hidden_layers": 24, "num_key_value_heads": 16,
        "vocab_size": 151936, "num_experts": 60, "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408, "decoder_sparse_step": 1, "mlp_only_layers": [],
    }  # fmt: skip
    return base | overrides


def test_llama_shape_maps_to_megatron_fields() -> None:
    m = model_from_hf_config(llama())
    shape = (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads,
             m.num_query_groups, m.vocab_size, m.max_position_embeddings)  # fmt: skip
    assert shape == (32, 4096, 14336, 32, 8, 128256, 8192)


def test_silu_means_swiglu_and_rms_means_rmsnorm() -> None:
    m = model_from_hf_config(llama())
    assert (m.swiglu, m.normalization) == (True, "RMSNorm")


def test_tied_word_embeddings_map_to_untie_false() -> None:
    assert (
        model_from_hf_config(llama(tie_word_embeddings=True)).untie_embeddings_and_output_weights
        is False
    )
    assert model_from_hf_config(llama()).untie_embeddings_and_output_weights is True


def test_kv_heads_equal_to_heads_is_multi_head_attention() -> None:
    assert model_from_hf_config(llama(num_key_value_heads=32)).num_query_groups is None


def test_missing_kv_heads_is_multi_head_attention() -> None:
    cfg = llama()
    del cfg["num_key_value_heads"]
    assert model_from_hf_config(cfg).num_query_groups is None


def test_head_dim_equal_to_h_over_a_is_left_default() -> None:
    assert model_from_hf_config(llama(head_dim=128)).kv_channels is None


def test_head_dim_different_from_h_over_a_sets_kv_channels() -> None:
    assert model_from_hf_config(llama(head_dim=256)).kv_channels == 256


def test_attention_bias_maps_to_qkv_bias() -> None:
    assert model_from_hf_config(llama(attention_bias=True)).add_qkv_bias is True


def test_name_defaults_to_name_or_path() -> None:
    cfg = llama(_name_or_path="meta-llama/Llama-3.1-8B")
    assert model_from_hf_config(cfg).name == "meta-llama/Llama-3.1-8B"


def test_explicit_name_wins() -> None:
    assert model_from_hf_config(llama(_name_or_path="x"), name="mine").name == "mine"


def test_model_type_is_detected_from_architectures() -> None:
    cfg = llama(architectures=["MixtralForCausalLM"], num_local_experts=8, num_experts_per_tok=2)
    del cfg["model_type"]
    assert model_from_hf_config(cfg).num_experts == 8


def test_yarn_rope_scaling_gives_yarn_position_embedding() -> None:
    cfg = llama(model_type="qwen3", rope_scaling={"rope_type": "yarn", "factor": 4.0})
    assert model_from_hf_config(cfg).position_embedding_type == "yarn"


def test_llama3_rope_scaling_stays_rope() -> None:
    cfg = llama(rope_scaling={"rope_type": "llama3", "factor": 8.0})
    assert model_from_hf_config(cfg).position_embedding_type == "rope"


def test_rope_theta_maps_to_rotary_base() -> None:
    assert model_from_hf_config(llama(rope_theta=500000.0)).rotary_base == 500000.0
    assert model_from_hf_config(llama(rope_theta=1000000)).rotary_base == 1e6


@pytest.mark.parametrize(
    ("model_type", "theta"),
    [("llama", 10000.0), ("mistral", 10000.0), ("mixtral", 1e6), ("qwen3", 10000.0),
     ("gpt_oss", 150000.0)],
)  # fmt: skip
def test_missing_rope_theta_is_the_transformers_default(model_type: str, theta: float) -> None:
    cfg = llama(model_type=model_type, num_local_experts=8, num_experts_per_tok=2)
    assert model_from_hf_config(cfg).rotary_base == theta


def test_llama3_rope_scaling_maps_to_use_rope_scaling() -> None:
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}  # fmt: skip
    m = model_from_hf_config(llama(rope_theta=500000.0, rope_scaling=scaling))
    assert (m.rotary_base, m.use_rope_scaling, m.rope_scaling_factor) == (500000.0, True, 8.0)
    assert m.rotary_scaling_factor is None


def test_llama32_rope_scaling_factor_is_kept() -> None:
    m = model_from_hf_config(llama(rope_scaling={"rope_type": "llama3", "factor": 32.0}))
    assert (m.use_rope_scaling, m.rope_scaling_factor) == (True, 32.0)


def test_llama3_scaling_that_megatron_fixes_otherwise_is_rejected() -> None:
    cfg = llama(rope_scaling={"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 2.0})
    with pytest.raises(SpecError, match="high_freq_factor") as err:
        model_from_hf_config(cfg)
    assert err.value.field == "rope_scaling"


def test_yarn_rope_scaling_maps_to_the_yarn_fields() -> None:
    scaling = {
        "type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
        "beta_fast": 32, "beta_slow": 1, "original_max_position_embeddings": 4096,
    }  # fmt: skip
    m = model_from_hf_config(llama(model_type="qwen3", rope_theta=10000, rope_scaling=scaling))
    assert m.position_embedding_type == "yarn"
    assert (m.rotary_scaling_factor, m.mscale, m.mscale_all_dim) == (40.0, 1.0, 1.0)
    assert m.use_rope_scaling is False


def test_yarn_without_mscale_leaves_megatron_defaults() -> None:
    cfg = llama(model_type="qwen3", rope_scaling={"rope_type": "yarn", "factor": 4.0})
    m = model_from_hf_config(cfg)
    assert (m.rotary_scaling_factor, m.mscale, m.mscale_all_dim) == (4.0, None, None)


def test_partial_rotary_factor_maps_to_rotary_percent() -> None:
    assert model_from_hf_config(llama(partial_rotary_factor=0.5)).rotary_percent == 0.5
    assert model_from_hf_config(llama()).rotary_percent == 1.0


def test_transformers5_rope_parameters_are_read() -> None:
    params = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}
    m = model_from_hf_config(llama(rope_parameters=params))
    assert (m.rotary_base, m.use_rope_scaling) == (500000.0, True)


def test_other_rope_scaling_types_are_noted_not_emitted() -> None:
    m = model_from_hf_config(llama(rope_scaling={"rope_type": "dynamic", "factor": 2.0}))
    assert (m.use_rope_scaling, m.rotary_scaling_factor) == (False, None)
    assert "'dynamic'" in m.sources["all"]


def test_non_numeric_rope_theta_is_rejected() -> None:
    with pytest.raises(SpecError, match="rope_theta"):
        model_from_hf_config(llama(rope_theta="500000"))


def test_deepseek_yarn_reaches_mla_fields() -> None:
    cfg = llama(
        model_type="deepseek_v3", num_key_value_heads=32, n_routed_experts=8,
        num_experts_per_tok=2, moe_intermediate_size=1024, kv_lora_rank=512,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        rope_scaling={"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0},
    )  # fmt: skip
    m = model_from_hf_config(cfg)
    assert m.multi_latent_attention and m.position_embedding_type == "rope"
    assert (m.rotary_base, m.rotary_scaling_factor, m.mscale_all_dim) == (10000.0, 40.0, 1.0)


def test_mistral_is_llama_shaped() -> None:
    m = model_from_hf_config(llama(model_type="mistral", sliding_window=4096))
    assert (m.num_layers, m.is_moe) == (32, False)


def test_qwen2_has_qkv_bias() -> None:
    m = model_from_hf_config(llama(model_type="qwen2"))
    assert (m.add_qkv_bias, m.add_bias_linear) == (True, False)


def test_qwen3_has_qk_layernorm() -> None:
    assert model_from_hf_config(llama(model_type="qwen3")).qk_layernorm is True


def test_qwen2_moe_shared_expert_is_the_total_size() -> None:
    m = model_from_hf_config(qwen_moe("qwen2_moe", shared_expert_intermediate_size=5632))
    assert m.moe_shared_expert_intermediate_size == 5632
    assert (m.num_experts, m.moe_router_topk, m.moe_ffn_hidden_size) == (60, 4, 1408)


def test_qwen3_moe_has_no_shared_expert() -> None:
    m = model_from_hf_config(qwen_moe("qwen3_moe", shared_expert_intermediate_size=5632))
    assert m.moe_shared_expert_intermediate_size is None


def test_leading_mlp_only_layers_become_first_dense_layers() -> None:
    m = model_from_hf_config(qwen_moe("qwen3_moe", mlp_only_layers=[0, 1]))
    assert m.moe_layer_pattern()[:3] == [False, False, True]


def test_scattered_mlp_only_layers_are_rejected() -> None:
    with pytest.raises(SpecError, match="mlp_only_layers") as info:
        model_from_hf_config(qwen_moe("qwen3_moe", mlp_only_layers=[5]))
    assert info.value.field == "mlp_only_layers"


def test_sparse_step_other_than_one_is_rejected() -> None:
    with pytest.raises(SpecError, match="decoder_sparse_step=2"):
        model_from_hf_config(qwen_moe("qwen2_moe", decoder_sparse_step=2))


def test_deepseek_shared_experts_multiply_the_expert_size() -> None:
    cfg = {
        "model_type": "deepseek_v3", "hidden_size": 1024, "intermediate_size": 4096,
        "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 8,
        "vocab_size": 32000, "n_routed_experts": 32, "num_experts_per_tok": 4,
        "moe_intermediate_size": 512, "n_shared_experts": 2, "first_k_dense_replace": 1,
        "q_lora_rank": None, "kv_lora_rank": 256, "qk_nope_head_dim": 64,
        "qk_rope_head_dim": 32, "v_head_dim": 64,
    }  # fmt: skip
    m = model_from_hf_config(cfg)
    assert m.moe_shared_expert_intermediate_size == 1024
    assert (m.q_lora_rank, m.num_query_groups, m.mtp_num_layers) == (None, None, 0)


def test_unsupported_model_type_lists_the_supported_ones() -> None:
    with pytest.raises(SpecError, match="qwen3_moe") as info:
        model_from_hf_config(llama(model_type="gemma2"))
    assert info.value.field == "model_type"
    assert "gemma2" in str(info.value)


def test_supported_types_cover_the_brief() -> None:
    expected = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                "deepseek_v3", "gpt_oss"}  # fmt: skip
    assert set(SUPPORTED_MODEL_TYPES) == expected


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "intermediate_size",
                                 "num_attention_heads", "vocab_size"])  # fmt: skip
def test_missing_required_key_is_named(key: str) -> None:
    cfg = llama()
    del cfg[key]
    with pytest.raises(SpecError, match=key) as info:
        model_from_hf_config(cfg)
    assert info.value.field == key


def test_missing_moe_key_is_named() -> None:
    cfg = llama(model_type="mixtral", num_experts_per_tok=2)
    with pytest.raises(SpecError, match="num_local_experts"):
        model_from_hf_config(cfg)


def test_non_integer_value_is_rejected() -> None:
    with pytest.raises(SpecError, match="hidden_size"):
        model_from_hf_config(llama(hidden_size="4096"))


def test_non_silu_activation_is_rejected() -> None:
    with pytest.raises(SpecError, match="hidden_act"):
        model_from_hf_config(llama(hidden_act="gelu"))


def test_no_model_type_at_all_is_rejected() -> None:
    cfg = llama()
    del cfg["model_type"]
    with pytest.raises(SpecError, match="model_type"):
        model_from_hf_config(cfg)
