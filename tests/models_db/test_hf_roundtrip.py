"""Hugging Face config.json values (as catalog-facts quotes them) give the catalog's spec.

The configs are written out here from the published files named in catalog-facts §0.2 (HFCOPY,
MB-fix, HF-OSS); keys a ModelSpec ignores are kept, as a real config.json carries them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from models_db.catalog import load_model
from planner.model.hf_config import model_from_hf_config

LLAMA31_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
    "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": False, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "vocab_size": 128256,
}  # fmt: skip

MIXTRAL_8X7B: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False,
    "vocab_size": 32000,
}  # fmt: skip

QWEN3_30B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
    "attention_dropout": 0.0, "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": 40960,
    "mlp_only_layers": [], "moe_intermediate_size": 768, "norm_topk_prob": True,
    "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "tie_word_embeddings": False,
    "vocab_size": 151936,
}  # fmt: skip

DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "attention_bias": False, "first_k_dense_replace": 3, "hidden_act": "silu",
    "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
    "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
    "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                     "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                     "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
    "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc",
    "v_head_dim": 128, "vocab_size": 129280,
}  # fmt: skip

GPT_OSS_120B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "attention_bias": True,
    "attention_dropout": 0.0, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "intermediate_size": 2880,
    "max_position_embeddings": 131072, "num_attention_heads": 64, "num_experts_per_tok": 4,
    "num_hidden_layers": 36, "num_key_value_heads": 8, "num_local_experts": 128,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                     "original_max_position_embeddings": 4096, "rope_type": "yarn"},
    "rope_theta": 150000, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "vocab_size": 201088,
}  # fmt: skip

LLAMA2_7B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "vocab_size": 32000,
}  # fmt: skip


@pytest.mark.parametrize(
    ("slug", "config"),
    [
        ("llama3.1-8b", LLAMA31_8B),
        ("llama2-7b", LLAMA2_7B),
        ("mixtral-8x7b", MIXTRAL_8X7B),
        ("qwen3-30b-a3b", QWEN3_30B_A3B),
        ("deepseek-v3", DEEPSEEK_V3),
        ("gpt-oss-120b", GPT_OSS_120B),
    ],
)
def test_hf_config_gives_the_catalog_spec(slug: str, config: dict[str, Any]) -> None:
    imported = model_from_hf_config(config, name=slug)
    catalog = load_model(slug)
    differing = {
        f.name: (getattr(imported, f.name), getattr(catalog, f.name))
        for f in dataclasses.fields(catalog)
        if f.compare and getattr(imported, f.name) != getattr(catalog, f.name)
    }
    assert differing == {}
