"""Specs shared by the planner tests (datasheet values as in models_db, fixed here so that the
tests do not depend on the catalog): one H100, one dense 8B and 70B, one MoE model.

Import the constants, or ask for the pytest fixtures of the same names in lower case
(``tests/planner/conftest.py``)."""

from __future__ import annotations

from dataclasses import replace

from planner.specs import GPUSpec, ModelSpec

H100 = GPUSpec(
    name="h100-sxm-80gb",
    hbm_bytes=80 * 2**30,
    hbm_bandwidth_bytes_per_s=3.35e12,
    peak_bf16_flop_per_s=989.4e12,
    peak_fp8_flop_per_s=1978.9e12,
    intra_node_bandwidth_bytes_per_s=450e9,
    architecture="hopper",
)

LLAMA_8B = ModelSpec(
    name="llama3.1-8b",
    num_layers=32,
    hidden_size=4096,
    ffn_hidden_size=14336,
    num_attention_heads=32,
    num_query_groups=8,
    vocab_size=128256,
)
"""Llama-3.1-8B's shape (catalog-facts), without its RoPE scaling."""

LLAMA_70B = ModelSpec(
    name="llama3.1-70b",
    num_layers=80,
    hidden_size=8192,
    ffn_hidden_size=28672,
    num_attention_heads=64,
    num_query_groups=8,
    vocab_size=128256,
)
"""Llama-3.1-70B's shape (catalog-facts), without its RoPE scaling."""

MIXTRAL_8X7B = ModelSpec(
    name="mixtral-8x7b",
    num_layers=32,
    hidden_size=4096,
    ffn_hidden_size=14336,
    num_attention_heads=32,
    num_query_groups=8,
    vocab_size=32000,
    num_experts=8,
    moe_router_topk=2,
)
"""Mixtral-8x7B's shape: the MoE model of the tests (8 experts, top-2)."""

DEEPSEEK_V3 = ModelSpec(
    name="deepseek-v3",
    num_layers=61,
    hidden_size=7168,
    ffn_hidden_size=18432,
    num_attention_heads=128,
    vocab_size=129280,
    multi_latent_attention=True,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_head_dim=128,
    qk_pos_emb_head_dim=64,
    v_head_dim=128,
    num_experts=256,
    moe_router_topk=8,
    moe_ffn_hidden_size=2048,
    moe_shared_expert_intermediate_size=2048,
    moe_first_dense_layers=3,
    mtp_num_layers=1,
)
"""DeepSeek-V3's shape: MLA, 256 routed experts (top-8) plus a shared one, 3 dense layers, MTP."""


SMALL_GPU = GPUSpec(
    name="test-80gib",
    hbm_bytes=80 * 2**30,
    hbm_bandwidth_bytes_per_s=3.35e12,
    peak_bf16_flop_per_s=989e12,
    peak_fp8_flop_per_s=1979e12,
    intra_node_bandwidth_bytes_per_s=450e9,
)
"""An 80 GiB Hopper-like GPU for the property tests (hypothesis)."""

SMALL_DENSE = ModelSpec(
    name="small-gqa",
    num_layers=16,
    hidden_size=2048,
    ffn_hidden_size=5632,
    num_attention_heads=16,
    num_query_groups=4,
    vocab_size=32000,
)
"""A small GQA model that many layouts fit: the dense model of the property tests."""

SMALL_MOE = replace(
    SMALL_DENSE, name="small-moe", num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=1408
)
"""SMALL_DENSE with 8 experts, top-2: the MoE model of the property tests."""
