"""Validation of :class:`planner.specs.ModelSpec`.

Called from ``ModelSpec.__post_init__``; kept here so that the domain-type module stays short
(as :mod:`planner.layout_checks` for the layout). Each error names the field and how to fix it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from planner.specs import SpecError, _divisors, _positive

if TYPE_CHECKING:
    from planner.specs import ModelSpec

__all__ = ["check_activation", "check_attention_window", "check_model", "check_rotary"]


def _finite_floats(model: ModelSpec, *names: str) -> None:
    """Each set field a finite number, stored as a float (500000 and 500000.0 are one value)."""
    for name in names:
        value = getattr(model, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{name}={value!r} must be a number", field=name)
        if not math.isfinite(value):
            raise SpecError(f"{name}={value} must be finite", field=name)
        object.__setattr__(model, name, float(value))


def check_rotary(model: ModelSpec) -> None:
    """Rotary settings: numbers in range, and only where Megatron reads them."""
    _finite_floats(model, "rotary_base", "rotary_percent", "rope_scaling_factor",
                   "rotary_scaling_factor", "mscale", "mscale_all_dim")  # fmt: skip
    if not isinstance(model.use_rope_scaling, bool):
        raise SpecError(
            f"use_rope_scaling={model.use_rope_scaling!r} must be true or false",
            field="use_rope_scaling",
        )
    if model.rotary_base is not None and model.rotary_base <= 0:
        raise SpecError(
            f"rotary_base={model.rotary_base} must be positive (RoPE theta, e.g. 10000 or "
            "500000), or null for Megatron's default 10000",
            field="rotary_base",
        )
    if not 0.0 < model.rotary_percent <= 1.0:
        raise SpecError(
            f"rotary_percent={model.rotary_percent} must be in (0, 1] (Nemotron-4: 0.5)",
            field="rotary_percent",
        )
    if model.rope_scaling_factor <= 0:
        raise SpecError(
            f"rope_scaling_factor={model.rope_scaling_factor} must be positive",
            field="rope_scaling_factor",
        )
    if model.rotary_scaling_factor is not None and model.rotary_scaling_factor < 1:
        raise SpecError(
            f"rotary_scaling_factor={model.rotary_scaling_factor} must be >= 1 (the YaRN "
            "context-extension factor), or null for no YaRN scaling",
            field="rotary_scaling_factor",
        )
    if model.mscale is not None and model.mscale <= 0:
        raise SpecError(f"mscale={model.mscale} must be positive", field="mscale")
    if model.mscale_all_dim is not None and model.mscale_all_dim < 0:
        raise SpecError(
            f"mscale_all_dim={model.mscale_all_dim} must be >= 0", field="mscale_all_dim"
        )
    rotary = model.multi_latent_attention or model.position_embedding_type in ("rope", "yarn")
    if not rotary:
        for name, default in (("rotary_base", None), ("rotary_percent", 1.0),
                              ("use_rope_scaling", False), ("rotary_scaling_factor", None),
                              ("mscale", None), ("mscale_all_dim", None)):  # fmt: skip
            if getattr(model, name) != default:
                raise SpecError(
                    f"{name}={getattr(model, name)!r} needs rotary position embeddings, but "
                    f"position_embedding_type is {model.position_embedding_type!r}; leave it "
                    "unset or use 'rope'/'yarn'",
                    field=name,
                )
    yarn = model.multi_latent_attention or model.position_embedding_type == "yarn"
    if model.rotary_scaling_factor is not None and not yarn:
        raise SpecError(
            "rotary_scaling_factor (YaRN) needs multi_latent_attention or "
            "position_embedding_type 'yarn'; Llama-3-style scaling is use_rope_scaling",
            field="rotary_scaling_factor",
        )
    for name in ("mscale", "mscale_all_dim"):
        if getattr(model, name) is not None and model.rotary_scaling_factor is None:
            raise SpecError(f"{name} is a YaRN setting and needs rotary_scaling_factor", field=name)
    if model.use_rope_scaling and yarn:
        raise SpecError(
            "use_rope_scaling (Llama-3 scaling) cannot be combined with YaRN "
            "(multi_latent_attention or position_embedding_type 'yarn')",
            field="use_rope_scaling",
        )


def check_model(model: ModelSpec) -> None:
    """Sizes positive, choices known, attention/MoE/MTP settings consistent, rotary checked."""
    _positive(
        model,
        "num_layers",
        "hidden_size",
        "ffn_hidden_size",
        "num_attention_heads",
        "vocab_size",
        "num_query_groups",
        "kv_channels",
        "max_position_embeddings",
        "moe_ffn_hidden_size",
        "moe_shared_expert_intermediate_size",
        "moe_layer_freq",
        "q_lora_rank",
        "kv_lora_rank",
        "qk_head_dim",
        "qk_pos_emb_head_dim",
        "v_head_dim",
    )
    if not model.name or not model.name.strip():
        raise SpecError("name must not be empty", field="name")
    if model.normalization not in ("LayerNorm", "RMSNorm"):
        raise SpecError(
            f"normalization={model.normalization!r} is not supported; use 'LayerNorm' or 'RMSNorm'",
            field="normalization",
        )
    if model.position_embedding_type not in ("rope", "yarn", "learned_absolute", "none"):
        raise SpecError(
            f"position_embedding_type={model.position_embedding_type!r} is not supported; "
            "use rope, yarn, learned_absolute or none",
            field="position_embedding_type",
        )
    a = model.num_attention_heads
    if model.kv_channels is None and not model.multi_latent_attention and model.hidden_size % a:
        raise SpecError(
            f"hidden_size={model.hidden_size} is not divisible by num_attention_heads={a}; "
            "set kv_channels (the head dimension) explicitly",
            field="kv_channels",
        )
    g = model.num_query_groups
    if g is not None:
        if model.multi_latent_attention:
            raise SpecError(
                "num_query_groups (GQA) cannot be combined with multi_latent_attention; "
                "leave num_query_groups unset for MLA models",
                field="num_query_groups",
            )
        if g > a or a % g:
            raise SpecError(
                f"num_query_groups={g} must divide num_attention_heads={a}; "
                f"valid values: {', '.join(map(str, _divisors(a)))}",
                field="num_query_groups",
            )
    if model.num_experts is not None:
        if model.num_experts < 1:
            raise SpecError(
                "num_experts must be >= 1, or null for a dense model", field="num_experts"
            )
        if not 1 <= model.moe_router_topk <= model.num_experts:
            raise SpecError(
                f"moe_router_topk={model.moe_router_topk} must be between 1 and "
                f"num_experts={model.num_experts}",
                field="moe_router_topk",
            )
    if not 0 <= model.moe_first_dense_layers < model.num_layers:
        raise SpecError(
            f"moe_first_dense_layers={model.moe_first_dense_layers} must be in "
            f"[0, num_layers={model.num_layers})",
            field="moe_first_dense_layers",
        )
    if model.multi_latent_attention:
        for name in ("kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"):
            if getattr(model, name) is None:
                raise SpecError(
                    f"{name} is required when multi_latent_attention is true "
                    "(DeepSeek-V3: kv_lora_rank 512, qk_head_dim 128, "
                    "qk_pos_emb_head_dim 64, v_head_dim 128)",
                    field=name,
                )
    if model.mtp_num_layers < 0:
        raise SpecError("mtp_num_layers must be >= 0", field="mtp_num_layers")
    if model.mtp_num_layers and model.position_embedding_type not in ("rope", "yarn", "none"):
        raise SpecError(
            "multi-token prediction needs rope or no position embedding (megatron-facts "
            "rule 60); set position_embedding_type to 'rope'",
            field="mtp_num_layers",
        )
    for name in ("hidden_dropout", "attention_dropout"):
        value = getattr(model, name)
        if not 0.0 <= value < 1.0:
            raise SpecError(f"{name}={value} must be in [0, 1)", field=name)
    check_rotary(model)
    check_activation(model)
    check_attention_window(model)


def _flag(model: ModelSpec, name: str) -> bool:
    value = getattr(model, name)
    if not isinstance(value, bool):
        raise SpecError(f"{name}={value!r} must be true or false", field=name)
    return value


def check_activation(model: ModelSpec) -> None:
    """One MLP activation (Megatron's --swiglu, --quick-geglu and --squared-relu exclude each
    other; none of them is GeLU), and the GLU offset and clamp only where they apply."""
    chosen = [n for n in ("swiglu", "quick_geglu", "squared_relu") if _flag(model, n)]
    if len(chosen) > 1:
        raise SpecError(
            f"{' and '.join(chosen)} are all set; an MLP has one activation: set only one of "
            "swiglu, quick_geglu, squared_relu (none of them means GeLU); GPT-OSS is quick_geglu "
            "with swiglu false",
            field=chosen[1],
        )
    _finite_floats(model, "glu_linear_offset", "activation_func_clamp_value")
    clamp = model.activation_func_clamp_value
    if model.glu_linear_offset != 0.0 and not model.gated_linear_unit:
        raise SpecError(
            f"glu_linear_offset={model.glu_linear_offset:g} applies to a gated MLP "
            "(act(gate) x (linear + offset)); set swiglu or quick_geglu, or leave it 0",
            field="glu_linear_offset",
        )
    if clamp is not None:
        if clamp <= 0:
            raise SpecError(
                f"activation_func_clamp_value={clamp:g} must be positive (GPT-OSS: 7.0), or "
                "null for no clamp",
                field="activation_func_clamp_value",
            )
        if not model.quick_geglu:  # catalog-facts §1.3 states it with --quick-geglu only
            raise SpecError(
                "activation_func_clamp_value is a quick-GeGLU setting (GPT-OSS: --quick-geglu "
                "--activation-func-clamp-value 7.0); set quick_geglu, or leave it null",
                field="activation_func_clamp_value",
            )


def check_attention_window(model: ModelSpec) -> None:
    """Sliding window as Megatron's (left, right) pair of non-negative token counts, its skip
    frequency >= 1 and only with a window, and a known softmax type (catalog-facts §1.6)."""
    window = model.window_size
    if window is not None:
        if isinstance(window, list):  # JSON has no tuples
            window = tuple(window)
            object.__setattr__(model, "window_size", window)
        if not isinstance(window, tuple) or len(window) != 2:
            raise SpecError(
                f"window_size={window!r} must be a pair [left, right] of token counts "
                "(GPT-OSS: [127, 0], a 128-token window), or null for full attention",
                field="window_size",
            )
        for side, value in zip(("left", "right"), window, strict=True):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(
                    f"window_size {side}={value!r} must be an integer >= 0 (a query sees "
                    "itself and `left` previous tokens; GPT-OSS: [127, 0])",
                    field="window_size",
                )
    freq = model.window_attn_skip_freq
    if freq is not None:
        if isinstance(freq, bool) or not isinstance(freq, int) or freq < 1:
            raise SpecError(
                f"window_attn_skip_freq={freq!r} must be an integer >= 1 (N-1 windowed layers "
                "then one full; GPT-OSS: 2), or null for every layer windowed",
                field="window_attn_skip_freq",
            )
        if window is None:
            raise SpecError(
                "window_attn_skip_freq needs window_size (it says which layers are windowed); "
                "set window_size or leave it null",
                field="window_attn_skip_freq",
            )
    if model.softmax_type not in ("vanilla", "off-by-one", "learnable"):
        raise SpecError(
            f"softmax_type={model.softmax_type!r} is not supported; use 'vanilla', "
            "'off-by-one' or 'learnable' (attention sinks, GPT-OSS)",
            field="softmax_type",
        )
