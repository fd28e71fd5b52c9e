"""Upper bounds of the numbers inside free-form spec objects (inline models, HF configs, catalog
specs), so that no request describes an absurd amount of work. Each 422 names the limit."""

from __future__ import annotations

from typing import Any

MODEL_LIMITS: dict[str, int] = {
    # Megatron / ModelSpec names
    "num_layers": 2048,
    "hidden_size": 1 << 17,
    "ffn_hidden_size": 1 << 20,
    "num_attention_heads": 4096,
    "num_query_groups": 4096,
    "kv_channels": 1 << 16,
    "vocab_size": 1 << 24,
    "max_position_embeddings": 1 << 24,
    "num_experts": 4096,
    "moe_router_topk": 256,
    "moe_ffn_hidden_size": 1 << 20,
    "moe_shared_expert_intermediate_size": 1 << 20,
    "moe_first_dense_layers": 2048,
    "q_lora_rank": 1 << 17,
    "kv_lora_rank": 1 << 17,
    "qk_head_dim": 1 << 16,
    "qk_pos_emb_head_dim": 1 << 16,
    "v_head_dim": 1 << 16,
    "mtp_num_layers": 64,
    # Hugging Face config.json names
    "num_hidden_layers": 2048,
    "intermediate_size": 1 << 20,
    "num_key_value_heads": 4096,
    "head_dim": 1 << 16,
    "n_routed_experts": 4096,
    "num_local_experts": 4096,
    "num_experts_per_tok": 256,
    "moe_intermediate_size": 1 << 20,
    "first_k_dense_replace": 2048,
    "num_nextn_predict_layers": 64,
    # cluster presets
    "gpus_per_node": 576,  # NVLink domains up to NVL576; GB200/GB300 racks are 72
    # user GPU specs: sanity caps far above any part (models_db/gpus: <= 288 GB of HBM, ~8 TB/s,
    # ~5e15 FLOP/s), so that 10**400 bytes is a 422 rather than an overflow in the planner
    "hbm_bytes": 1 << 44,
    "hbm_bandwidth_bytes_per_s": 10**15,
    "peak_bf16_flop_per_s": 10**18,
    "peak_fp8_flop_per_s": 10**18,
    "intra_node_bandwidth_bytes_per_s": 10**15,
    "host_link_bandwidth_bytes_per_s": 10**15,
    "sm_count": 1 << 20,
}


def check_spec_numbers(spec: Any, where: str = "model") -> Any:
    """``spec`` unchanged, or ValueError naming the first number above its limit."""
    if not isinstance(spec, dict):
        return spec
    for name, limit in MODEL_LIMITS.items():
        value = spec.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > limit:
            if isinstance(value, float) or value < 1e300:
                raise ValueError(f"{where}.{name}={value:g} is above the limit of {limit}")
            # 10**400 overflows :g (a 500 before), and str() refuses past 4 300 digits
            raise ValueError(f"{where}.{name} is above the limit of {limit} (got a huge number)")
    text_config = spec.get("text_config")  # multimodal HF configs nest the language model
    if isinstance(text_config, dict):
        check_spec_numbers(text_config, f"{where}.text_config")
    return spec
