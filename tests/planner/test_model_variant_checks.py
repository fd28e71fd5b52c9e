"""ModelSpec checks of the activation and sliding-window fields: each names the field."""

from __future__ import annotations

from typing import Any

import pytest

from planner.model.attention_window import windowed_layer_pattern
from planner.specs import ModelSpec, SpecError

BASE: dict[str, Any] = {
    "name": "m", "num_layers": 4, "hidden_size": 512, "ffn_hidden_size": 2048,
    "num_attention_heads": 8, "vocab_size": 32000,
}  # fmt: skip


def model(**overrides: Any) -> ModelSpec:
    return ModelSpec(**(BASE | overrides))


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"quick_geglu": True}, "quick_geglu", "swiglu and quick_geglu are all set"),
        ({"swiglu": False, "quick_geglu": True, "squared_relu": True}, "squared_relu", "one"),
        ({"swiglu": False, "glu_linear_offset": 1.0}, "glu_linear_offset", "gated MLP"),
        ({"activation_func_clamp_value": 7.0}, "activation_func_clamp_value", "quick-GeGLU"),
        ({"swiglu": False, "quick_geglu": True, "activation_func_clamp_value": 0.0},
         "activation_func_clamp_value", "must be positive"),
        ({"window_size": (-1, 0)}, "window_size", "left=-1 must be an integer >= 0"),
        ({"window_size": (127,)}, "window_size", "must be a pair"),
        ({"window_size": (127, 0), "window_attn_skip_freq": 0}, "window_attn_skip_freq", ">= 1"),
        ({"window_attn_skip_freq": 2}, "window_attn_skip_freq", "needs window_size"),
        ({"softmax_type": "sinks"}, "softmax_type", "'learnable'"),
    ],
)  # fmt: skip
def test_contradictions_and_bad_values_name_the_field(
    overrides: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(SpecError, match=message) as err:
        model(**overrides)
    assert err.value.field == field


def test_gpt_oss_combination_is_accepted_and_json_list_becomes_a_pair() -> None:
    m = model(swiglu=False, quick_geglu=True, glu_linear_offset=1, activation_func_clamp_value=7,
              window_size=[127, 0], window_attn_skip_freq=2, softmax_type="learnable")  # fmt: skip
    assert m.window_size == (127, 0) and m.gated_linear_unit
    assert m == ModelSpec.from_dict(m.to_dict() | {"window_size": [127, 0]})


def test_skip_freq_n_is_n_minus_1_windowed_then_one_full() -> None:
    m = model(num_layers=6, window_size=(127, 0), window_attn_skip_freq=3)
    assert windowed_layer_pattern(m) == [True, True, False, True, True, False]
    assert sum(windowed_layer_pattern(model(window_size=(127, 0)))) == 4


def test_squared_relu_is_not_gated() -> None:
    assert not model(swiglu=False, squared_relu=True).gated_linear_unit
