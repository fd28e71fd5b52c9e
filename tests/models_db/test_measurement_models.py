"""model_name strings of measured-throughput.csv -> catalog models."""

from __future__ import annotations

import pytest

from models_db.measurement_models import catalog_slug, model_for_measurement


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Llama 3.1 405b (proxy)", "llama3.1-405b"),
        ("LLAMA3-70B", "llama3.1-70b"),
        ("LLAMA2-13B SFT", "llama2-13b"),
        ("Nemotron4 15b", "nemotron-4-15b"),
        ("Nemotron-340B", "nemotron-4-340b"),
        ("Grok 1 314b", "grok-1"),
        ("NeMo Megatron GPT3 175b", "gpt3-175b"),
    ],
)
def test_published_models_map_to_their_catalog_slug(name: str, slug: str) -> None:
    assert catalog_slug(name) == slug


@pytest.mark.parametrize(
    "name", ["GPT3-5B", "GPT-18.4B (Narayanan Table 1)", "Nemotron-8B", "BLOOM-style GPT (h=1)"]
)
def test_scaled_variants_are_not_catalog_models(name: str) -> None:
    assert catalog_slug(name) is None


def test_the_lookup_returns_the_catalog_spec() -> None:
    m = model_for_measurement("Grok 1 314b (proxy)")
    assert m is not None and (m.num_experts, m.moe_router_topk, m.hidden_size) == (8, 2, 6144)
