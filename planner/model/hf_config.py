"""Build a :class:`ModelSpec` from a Hugging Face ``config.json`` dictionary.

Supported ``model_type`` values: llama (Llama 1/2/3/3.1), mistral, mixtral, qwen2, qwen2_moe,
qwen3, qwen3_moe, deepseek_v3 and gpt_oss. Key names follow the transformers configuration
classes; the Megatron meaning of each field is in ``planner/specs.py``. RoPE settings map to the
rotary fields: ``rope_theta`` to rotary_base (the transformers default of the model type when the
key is absent), ``partial_rotary_factor`` to rotary_percent, ``rope_scaling`` of type 'llama3' to
use_rope_scaling and rope_scaling_factor, and of type 'yarn' to rotary_scaling_factor, mscale and
mscale_all_dim. Sliding windows, GPT-OSS's attention sinks and activation are read by
:mod:`planner.model.hf_variants`. Features that a ModelSpec cannot express (YaRN
beta/original-length details, router settings) are dropped, and the returned spec's ``sources``
says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planner.model.hf_variants import gpt_oss_variant_fields, window_fields
from planner.specs import ModelSpec, PositionEmbedding, SpecError

__all__ = ["SUPPORTED_MODEL_TYPES", "model_from_hf_config"]

_ARCHITECTURE_TO_TYPE: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "GptOssForCausalLM": "gpt_oss",
}

_GATED_SILU = ("silu", "swish")

_DEFAULT_ROPE_THETA: dict[str, float] = {
    # the rope_theta default of each transformers configuration class, used when the key is absent
    "llama": 10000.0,
    "mistral": 10000.0,
    "mixtral": 1e6,
    "qwen2": 10000.0,
    "qwen2_moe": 10000.0,
    "qwen3": 10000.0,
    "qwen3_moe": 10000.0,
    "deepseek_v3": 10000.0,
    "gpt_oss": 150000.0,
}

# What Megatron's --use-rope-scaling fixes besides the factor (catalog-facts §1.3, Llama 3.1).
_LLAMA3_FIXED = {"low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192}  # fmt: skip


class _Config:
    """Typed, key-naming access to one HF config dictionary."""

    def __init__(self, data: Mapping[str, Any], model_type: str) -> None:
        self.data = data
        self.model_type = model_type

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.data.get(key)
        if value is None:
            if default is not None:
                return default
            raise SpecError(
                f"Hugging Face config (model_type {self.model_type!r}) is missing the required "
                f"key {key!r}",
                field=key,
            )
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(
                f"Hugging Face config key {key!r}={value!r} must be an integer", field=key
            )
        return value

    def opt_int(self, key: str) -> int | None:
        return self.integer(key) if self.has(key) else None

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise SpecError(
                f"Hugging Face config key {key!r}={value!r} must be true or false", field=key
            )
        return value

    def number(self, key: str, default: float) -> float:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(
                f"Hugging Face config key {key!r}={value!r} must be a number", field=key
            )
        return float(value)


def _detect_model_type(config: Mapping[str, Any]) -> str:
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type:
        return model_type
    architectures = config.get("architectures")
    if isinstance(architectures, list):
        for arch in architectures:
            if isinstance(arch, str) and arch in _ARCHITECTURE_TO_TYPE:
                return _ARCHITECTURE_TO_TYPE[arch]
    raise SpecError(
        "Hugging Face config has no 'model_type' (and no known 'architectures' entry); "
        f"supported model types: {', '.join(SUPPORTED_MODEL_TYPES)}",
        field="model_type",
    )


def _rope_scaling(cfg: _Config) -> tuple[str | None, Mapping[str, Any]]:
    """(scaling type, its parameters): ``rope_scaling``, or transformers 5's ``rope_parameters``."""
    for key in ("rope_scaling", "rope_parameters"):
        scaling = cfg.data.get(key)
        if isinstance(scaling, Mapping):
            kind = scaling.get("rope_type", scaling.get("type"))
            if kind is not None and kind != "default":
                return str(kind), scaling
    return None, {}


def _position_embedding(cfg: _Config) -> PositionEmbedding:
    kind, _ = _rope_scaling(cfg)
    # Llama-3 style scaling is still Megatron's plain rope with --use-rope-scaling.
    return "yarn" if kind == "yarn" else "rope"


def _scaling_number(params: Mapping[str, Any], key: str, where: str) -> float | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(
            f"Hugging Face config {where}[{key!r}]={value!r} must be a number", field=where
        )
    return float(value)


def _rotary_fields(cfg: _Config) -> dict[str, Any]:
    """rope_theta, partial_rotary_factor and rope_scaling as ModelSpec rotary fields."""
    parameters = cfg.data.get("rope_parameters")
    theta_source = parameters if isinstance(parameters, Mapping) else cfg.data
    theta = theta_source.get("rope_theta", cfg.data.get("rope_theta"))
    if theta is None:
        theta = _DEFAULT_ROPE_THETA.get(cfg.model_type)
    elif isinstance(theta, bool) or not isinstance(theta, int | float):
        raise SpecError(
            f"Hugging Face config key 'rope_theta'={theta!r} must be a number", field="rope_theta"
        )
    fields: dict[str, Any] = {
        "rotary_base": None if theta is None else float(theta),
        "rotary_percent": cfg.number("partial_rotary_factor", 1.0),
    }
    kind, params = _rope_scaling(cfg)
    where = (
        "rope_scaling" if isinstance(cfg.data.get("rope_scaling"), Mapping) else "rope_parameters"
    )
    if kind == "llama3":
        for key, fixed in _LLAMA3_FIXED.items():
            value = _scaling_number(params, key, where)
            if value is not None and value != fixed:
                raise SpecError(
                    f"{where}[{key!r}]={value:g} is not supported: Megatron's "
                    f"--use-rope-scaling fixes it at {fixed:g} (only the factor is a flag)",
                    field=where,
                )
        factor = _scaling_number(params, "factor", where)
        fields.update(use_rope_scaling=True, rope_scaling_factor=factor or 8.0)
    elif kind == "yarn":
        fields.update(
            rotary_scaling_factor=_scaling_number(params, "factor", where),
            mscale=_scaling_number(params, "mscale", where),
            mscale_all_dim=_scaling_number(params, "mscale_all_dim", where),
        )
    return fields


def _unexpressed_rope_scaling(cfg: _Config) -> str | None:
    kind, _ = _rope_scaling(cfg)
    if kind is None or kind in ("llama3", "yarn"):
        return None
    return f"rope scaling type {kind!r} has no Megatron flag here and is not emitted"


def _check_gated_silu(cfg: _Config) -> None:
    act = cfg.data.get("hidden_act", "silu")
    if act not in _GATED_SILU:
        raise SpecError(
            f"hidden_act={act!r} is not supported for model_type {cfg.model_type!r}: the planner "
            "models these gated MLPs as SwiGLU and needs hidden_act 'silu'",
            field="hidden_act",
        )


def _query_groups(cfg: _Config, heads: int) -> int | None:
    groups = cfg.integer("num_key_value_heads", heads)
    return None if groups == heads else groups  # None = multi-head attention


def _kv_channels(cfg: _Config, hidden: int, heads: int) -> int | None:
    head_dim = cfg.opt_int("head_dim")
    if head_dim is None:
        return None
    # Only an explicit head_dim that differs from h/a needs --kv-channels (catalog-facts pitfall 3).
    if hidden % heads == 0 and head_dim == hidden // heads:
        return None
    return head_dim


def _dense_fields(cfg: _Config) -> dict[str, Any]:
    """Fields shared by every supported (Llama-like) decoder."""
    hidden = cfg.integer("hidden_size")
    heads = cfg.integer("num_attention_heads")
    return {
        "num_layers": cfg.integer("num_hidden_layers"),
        "hidden_size": hidden,
        "ffn_hidden_size": cfg.integer("intermediate_size"),
        "num_attention_heads": heads,
        "num_query_groups": _query_groups(cfg, heads),
        "kv_channels": _kv_channels(cfg, hidden, heads),
        "vocab_size": cfg.integer("vocab_size"),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings"),
        "swiglu": True,
        "normalization": "RMSNorm",
        "position_embedding_type": _position_embedding(cfg),
        **_rotary_fields(cfg),
        "untie_embeddings_and_output_weights": not cfg.flag("tie_word_embeddings", False),
        "add_bias_linear": cfg.flag("mlp_bias", False),
        "add_qkv_bias": cfg.flag("attention_bias", False),
        "attention_dropout": cfg.number("attention_dropout", 0.0),
    }


def _llama(cfg: _Config) -> dict[str, Any]:
    _check_gated_silu(cfg)
    return _dense_fields(cfg)


def _mistral(cfg: _Config) -> dict[str, Any]:
    fields = _llama(cfg)
    return fields | window_fields(cfg.data, cfg.model_type, fields["num_layers"])


def _mixtral(cfg: _Config) -> dict[str, Any]:
    _check_gated_silu(cfg)
    fields = _dense_fields(cfg)
    fields.update(
        num_experts=cfg.integer("num_local_experts"),
        moe_router_topk=cfg.integer("num_experts_per_tok"),
        moe_ffn_hidden_size=fields["ffn_hidden_size"],  # every Mixtral layer is MoE
    )
    return fields


def _qwen2(cfg: _Config) -> dict[str, Any]:
    _check_gated_silu(cfg)
    fields = _dense_fields(cfg)
    fields["add_qkv_bias"] = True  # Qwen2 always has q/k/v biases and no attention_bias key
    return fields


def _qwen3(cfg: _Config) -> dict[str, Any]:
    _check_gated_silu(cfg)
    fields = _dense_fields(cfg)
    fields["qk_layernorm"] = True  # per-head RMSNorm on Q and K (catalog-facts §1.3)
    return fields


def _leading_dense_layers(cfg: _Config, num_layers: int) -> int:
    """Turn HF's decoder_sparse_step / mlp_only_layers into Megatron's MoE layer pattern."""
    step = cfg.integer("decoder_sparse_step", 1)
    if step != 1:
        raise SpecError(
            f"decoder_sparse_step={step} is not supported: HF puts MoE on layers where "
            "(i + 1) % step == 0, which Megatron's --moe-layer-freq cannot express; only 1 is "
            "supported",
            field="decoder_sparse_step",
        )
    dense = cfg.data.get("mlp_only_layers") or []
    if not isinstance(dense, list) or sorted(dense) != list(range(len(dense))):
        raise SpecError(
            f"mlp_only_layers={dense!r} is not supported: only a leading run of dense layers "
            "(0, 1, ..., k-1) can be expressed",
            field="mlp_only_layers",
        )
    if len(dense) >= num_layers:
        raise SpecError(
            "mlp_only_layers covers every layer; use the dense model type", field="mlp_only_layers"
        )
    return len(dense)


def _qwen_moe(cfg: _Config, *, qwen3: bool) -> dict[str, Any]:
    fields = _qwen3(cfg) if qwen3 else _qwen2(cfg)
    shared = cfg.integer("shared_expert_intermediate_size", 0) if not qwen3 else 0
    fields.update(
        num_experts=cfg.integer("num_experts"),
        moe_router_topk=cfg.integer("num_experts_per_tok"),
        moe_ffn_hidden_size=cfg.integer("moe_intermediate_size"),
        moe_shared_expert_intermediate_size=shared or None,
        moe_first_dense_layers=_leading_dense_layers(cfg, fields["num_layers"]),
    )
    return fields


def _deepseek_v3(cfg: _Config) -> dict[str, Any]:
    _check_gated_silu(cfg)
    fields = _dense_fields(cfg)
    n_shared = cfg.integer("n_shared_experts", 0)
    moe_ffn = cfg.integer("moe_intermediate_size")
    fields.update(
        # MLA has no GQA: the config's num_key_value_heads is ignored (catalog-facts §1.5).
        num_query_groups=None,
        kv_channels=None,
        # YaRN reaches MLA through --rope-type, so the position type stays rope (megatron §1.11).
        position_embedding_type="rope",
        qk_layernorm=True,  # q/kv latent RMSNorms, mapped by NVIDIA to --qk-layernorm
        num_experts=cfg.integer("n_routed_experts"),
        moe_router_topk=cfg.integer("num_experts_per_tok"),
        moe_ffn_hidden_size=moe_ffn,
        # Megatron takes the total size of all shared experts (megatron-facts §1.5).
        moe_shared_expert_intermediate_size=n_shared * moe_ffn or None,
        moe_first_dense_layers=cfg.integer("first_k_dense_replace", 0),
        moe_layer_freq=cfg.integer("moe_layer_freq", 1),
        multi_latent_attention=True,
        q_lora_rank=cfg.opt_int("q_lora_rank"),
        kv_lora_rank=cfg.integer("kv_lora_rank"),
        qk_head_dim=cfg.integer("qk_nope_head_dim"),
        qk_pos_emb_head_dim=cfg.integer("qk_rope_head_dim"),
        v_head_dim=cfg.integer("v_head_dim"),
        mtp_num_layers=cfg.integer("num_nextn_predict_layers", 0),
    )
    return fields


def _gpt_oss(cfg: _Config) -> dict[str, Any]:
    fields = _dense_fields(cfg)
    topk_key = "num_experts_per_tok" if cfg.has("num_experts_per_tok") else "experts_per_token"
    fields.update(
        # clamped quick-GeGLU and learned attention sinks (catalog-facts §1.3, §1.6)
        **gpt_oss_variant_fields(cfg.data),
        **window_fields(cfg.data, cfg.model_type, fields["num_layers"]),
        add_bias_linear=True,  # QKV, output projection, router and experts carry biases
        add_qkv_bias=cfg.flag("attention_bias", True),
        num_experts=cfg.integer("num_local_experts"),
        moe_router_topk=cfg.integer(topk_key),
        moe_ffn_hidden_size=fields["ffn_hidden_size"],
    )
    return fields


_PARSERS: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen2_moe": lambda cfg: _qwen_moe(cfg, qwen3=False),
    "qwen3": _qwen3,
    "qwen3_moe": lambda cfg: _qwen_moe(cfg, qwen3=True),
    "deepseek_v3": _deepseek_v3,
    "gpt_oss": _gpt_oss,
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_PARSERS)

_NOT_EXPRESSED = {
    "deepseek_v3": "router settings (sigmoid, groups, scaling) and the YaRN original length and "
    "beta_fast/beta_slow are not modelled",
    "gpt_oss": "the YaRN original length and beta_fast/beta_slow are not modelled",
}


def model_from_hf_config(config: Mapping[str, Any], *, name: str | None = None) -> ModelSpec:
    """Translate a Hugging Face ``config.json`` (as a dict) into a :class:`ModelSpec`.

    ``name`` defaults to the config's ``_name_or_path`` or its ``model_type``. Raises
    :class:`SpecError` naming the key when a required key is missing or a value cannot be
    expressed in Megatron terms, and listing the supported model types for an unknown one.
    """
    if not isinstance(config, Mapping):
        raise SpecError(f"a Hugging Face config must be an object, got {type(config).__name__}")
    model_type = _detect_model_type(config)
    parser = _PARSERS.get(model_type)
    if parser is None:
        raise SpecError(
            f"Hugging Face model_type {model_type!r} is not supported; supported: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}",
            field="model_type",
        )
    fields = parser(_Config(config, model_type))
    default_name = config.get("_name_or_path") or model_type
    note = f"Hugging Face config.json (model_type {model_type}) read by planner.model.hf_config"
    if model_type in _NOT_EXPRESSED:
        note += f"; {_NOT_EXPRESSED[model_type]}"
    unexpressed = _unexpressed_rope_scaling(_Config(config, model_type))
    if unexpressed:
        note += f"; {unexpressed}"
    return ModelSpec(name=name or str(default_name), sources={"all": note}, **fields)
