"""Which catalog model a row of ``measured-throughput.csv`` ran, by its ``model_name`` text.

Passed as ``model_lookup`` to :func:`planner.calibration.measurements.parse_rows` (``planner``
never imports
the catalog). Only names that identify one published model map to a slug: the NVIDIA recipe
names (dgxc-benchmarking, NeMo performance tables) and the GPT-3 175B rows of the Megatron
papers. Scaled GPT variants ("GPT-18.4B (Narayanan Table 1)", "GPT3-5B"), BLOOM candidates and
the Megatron README's GPT family are no catalog models and stay with their own columns. The
loader checks that every column a row gives agrees with the catalog entry before using it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from models_db.catalog import load_model
from planner.specs import ModelSpec

# (pattern on the lower-cased name without "(proxy)" / " sft", catalog slug)
_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"^llama ?3\.1[ -]405b$", "llama3.1-405b"),
    (r"^llama ?3(\.1)?[ -]70b$", "llama3.1-70b"),
    (r"^llama ?3(\.1)?[ -]8b$", "llama3.1-8b"),
    (r"^llama ?2[ -]7b$", "llama2-7b"),
    (r"^llama ?2[ -]13b$", "llama2-13b"),
    (r"^llama ?2[ -]70b$", "llama2-70b"),
    (r"^nemotron-?4 ?15b$", "nemotron-4-15b"),
    (r"^nemotron-?4? ?340b$", "nemotron-4-340b"),
    (r"^grok[ -]?1( 314b)?$", "grok-1"),
    (r"^mixtral[ -]8x7b$", "mixtral-8x7b"),
    (r"^mixtral[ -]8x22b$", "mixtral-8x22b"),
    (r"^(nemo megatron )?gpt-?3[ -]175b$", "gpt3-175b"),
    (r"^deepseek[ -]v3$", "deepseek-v3"),
    (r"^qwen3[ -]30b[ -]a3b$", "qwen3-30b-a3b"),
    (r"^qwen3[ -]235b[ -]a22b$", "qwen3-235b-a22b"),
)


def catalog_slug(model_name: str) -> str | None:
    """Catalog slug named by a measurement's model_name, or None."""
    key = model_name.strip().lower()
    key = re.sub(r"\s*\(proxy\)\s*$", "", key)
    key = re.sub(r"\s+sft$", "", key)
    for pattern, slug in _PATTERNS:
        if re.match(pattern, key):
            return slug
    return None


@lru_cache(maxsize=64)
def model_for_measurement(model_name: str) -> ModelSpec | None:
    """The catalog ModelSpec a measurement row's model_name names, or None."""
    slug = catalog_slug(model_name)
    return None if slug is None else load_model(slug)
