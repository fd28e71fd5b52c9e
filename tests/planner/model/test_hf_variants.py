"""planner.model.hf_variants: sliding windows, sinks and GPT-OSS's activation from config.json."""

from __future__ import annotations

from typing import Any

import pytest

from planner.model.attention_window import windowed_layer_pattern
from planner.model.hf_config import model_from_hf_config
from planner.specs import SpecError
from tests.models_db.test_hf_roundtrip import GPT_OSS_120B
from tests.planner.model.test_hf_config import llama

ALTERNATING = ["sliding_attention", "full_attention"] * 18


def gpt_oss(**overrides: Any) -> dict[str, Any]:
    return GPT_OSS_120B | overrides


def test_gpt_oss_window_is_megatrons_127_0_on_even_layers() -> None:
    m = model_from_hf_config(gpt_oss(layer_types=ALTERNATING))
    assert (m.window_size, m.window_attn_skip_freq) == ((127, 0), 2)
    assert windowed_layer_pattern(m)[:4] == [True, False, True, False]
    assert sum(windowed_layer_pattern(m)) == 18


def test_gpt_oss_without_layer_types_alternates_from_layer_0() -> None:
    m = model_from_hf_config(gpt_oss())
    assert (m.window_size, m.window_attn_skip_freq) == ((127, 0), 2)


def test_gpt_oss_sinks_and_clamped_quick_geglu() -> None:
    m = model_from_hf_config(gpt_oss(swiglu_limit=5.0))
    assert (m.softmax_type, m.quick_geglu, m.swiglu) == ("learnable", True, False)
    assert (m.glu_linear_offset, m.activation_func_clamp_value) == (1.0, 5.0)
    assert "sliding" not in m.sources["all"] and "sinks" not in m.sources["all"]


def test_mistral_sliding_window_covers_every_layer() -> None:
    m = model_from_hf_config(llama(model_type="mistral", sliding_window=4096))
    assert (m.window_size, m.window_attn_skip_freq) == ((4095, 0), None)
    assert sum(windowed_layer_pattern(m)) == 32
    assert m.softmax_type == "vanilla" and m.swiglu


def test_mistral_without_a_window_has_full_attention() -> None:
    m = model_from_hf_config(llama(model_type="mistral", sliding_window=None))
    assert m.window_size is None
    assert "not modelled" not in m.sources["all"]


def test_layer_types_all_full_means_no_window() -> None:
    m = model_from_hf_config(gpt_oss(layer_types=["full_attention"] * 36))
    assert m.window_size is None


def test_every_third_layer_full_is_skip_freq_3() -> None:
    types = ["sliding_attention", "sliding_attention", "full_attention"] * 12
    assert model_from_hf_config(gpt_oss(layer_types=types)).window_attn_skip_freq == 3


@pytest.mark.parametrize(
    ("layer_types", "message"),
    [
        (["full_attention", "sliding_attention"] * 18, "N-1 sliding layers then one full"),
        (["sliding_attention"] * 35, "one entry per layer"),
        (["chunked_attention"] * 36, "only 'sliding_attention' and 'full_attention'"),
    ],
)
def test_layer_types_megatron_cannot_express_are_refused(
    layer_types: list[str], message: str
) -> None:
    with pytest.raises(SpecError, match=message) as err:
        model_from_hf_config(gpt_oss(layer_types=layer_types))
    assert err.value.field == "layer_types"


def test_non_positive_sliding_window_is_refused() -> None:
    with pytest.raises(SpecError, match="'sliding_window'=0 must be a positive integer"):
        model_from_hf_config(llama(model_type="mistral", sliding_window=0))
