"""Sliding windows, attention sinks and GPT-OSS's activation read from a Hugging Face config
(for :mod:`planner.model.hf_config`).

* ``sliding_window`` w (gpt_oss, mistral) is the keys a query sees, itself included: Megatron's
  ``--window-size w-1,0`` (catalog-facts §1.6 and pitfall 11: HF's 128 is Megatron's 127,0).
  For mistral the same meaning of the key is taken [inferred from the gpt_oss row: both are the
  transformers ``sliding_window`` key].
* ``layer_types`` ("sliding_attention" / "full_attention" per layer) becomes
  ``--window-attn-skip-freq N`` where the pattern is N-1 windowed layers then one full; without
  the key gpt_oss alternates from a windowed layer 0 (catalog-facts §1.6) and mistral windows
  every layer.
* gpt_oss always has learned sinks (``--softmax-type learnable``) and the clamped quick-GeGLU:
  ``--quick-geglu --glu-linear-offset 1.0 --activation-func-clamp-value`` ``swiglu_limit``
  (catalog-facts §1.3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.specs import SpecError

__all__ = ["gpt_oss_variant_fields", "window_fields"]

_SLIDING, _FULL = "sliding_attention", "full_attention"


def _skip_freq(layer_types: Any, num_layers: int) -> tuple[bool, int | None]:
    """(any windowed layer, skip freq) of a ``layer_types`` list; SpecError if no N fits."""
    if not isinstance(layer_types, list) or len(layer_types) != num_layers:
        raise SpecError(
            f"Hugging Face config key 'layer_types' must list one entry per layer "
            f"(num_hidden_layers={num_layers})",
            field="layer_types",
        )
    unknown = sorted({str(t) for t in layer_types} - {_SLIDING, _FULL})
    if unknown:
        raise SpecError(
            f"layer_types has {', '.join(unknown)}; only {_SLIDING!r} and {_FULL!r} are supported",
            field="layer_types",
        )
    windowed = [t == _SLIDING for t in layer_types]
    if not any(windowed):
        return False, None
    if all(windowed):
        return True, None
    for freq in range(2, num_layers + 1):
        if windowed == [(i + 1) % freq != 0 for i in range(num_layers)]:
            return True, freq
    raise SpecError(
        "layer_types is not 'N-1 sliding layers then one full layer' repeated, which is what "
        "Megatron's --window-attn-skip-freq N expresses (layer 0 sliding)",
        field="layer_types",
    )


def window_fields(config: Mapping[str, Any], model_type: str, num_layers: int) -> dict[str, Any]:
    """window_size and window_attn_skip_freq of a config with ``sliding_window`` (else {})."""
    window = config.get("sliding_window")
    if window is None:
        return {}
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise SpecError(
            f"Hugging Face config key 'sliding_window'={window!r} must be a positive integer "
            "(the keys a query sees, itself included) or null",
            field="sliding_window",
        )
    layer_types = config.get("layer_types")
    if layer_types is not None:
        windowed, freq = _skip_freq(layer_types, num_layers)
    else:  # transformers' defaults: gpt_oss alternates from layer 0, mistral windows every layer
        windowed, freq = True, (2 if model_type == "gpt_oss" else None)
    if not windowed:
        return {}
    return {"window_size": (window - 1, 0), "window_attn_skip_freq": freq}


def gpt_oss_variant_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """GPT-OSS's sinks and clamped quick-GeGLU (catalog-facts §1.3, §1.6)."""
    limit = config.get("swiglu_limit", 7.0)
    if isinstance(limit, bool) or not isinstance(limit, int | float) or limit <= 0:
        raise SpecError(
            f"Hugging Face config key 'swiglu_limit'={limit!r} must be a positive number",
            field="swiglu_limit",
        )
    return {
        "swiglu": False,
        "quick_geglu": True,
        "glu_linear_offset": 1.0,  # (linear + 1), catalog-facts §1.3
        "activation_func_clamp_value": float(limit),
        "softmax_type": "learnable",  # one learned sink per query head, catalog-facts §1.6
    }
