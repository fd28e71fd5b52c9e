"""The architecture of a measured run: from the row's own columns, completed from a catalog.

Helpers for :mod:`planner.calibration.measurements`. A row gives what its source states; nothing
is filled
from a guess. Three sourced completions are allowed, each recorded in the measurement's
``derivation``:

* ``model_lookup`` (passed by the caller; ``planner`` never imports the catalog) names the
  published model the row ran (``Llama 3.1 70b`` -> the catalog's Llama-3.1-70B). Its fields fill
  the row's empty columns only when every architecture column the row does give agrees with the
  catalog; a reduced-layer proxy run (``(proxy)`` in the name) keeps its own num_layers;
* BLOOM rows whose own text states the vocabulary ("vocab ~250k") take BLOOM's tokenizer size,
  250,880 entries (BigScience tr11-176B-ml config: padded 250,880);
* rows parsed from a Megatron-LM log carry the model flags (``swiglu=True``,
  ``normalization=RMSNorm``, ...) in ``other_metrics``; those are read as stated, and a flag the
  arguments block leaves out is at Megatron's default (megatron-facts §1.4).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace

from planner.plain_numbers import IN_WHOLE_DIGITS, read_decimal
from planner.specs import ModelSpec

BLOOM_VOCAB = 250_880  # BigScience BLOOM tokenizer (tr11-176B-ml: vocab 250,680 padded 250,880)
DROPOUT_DEFAULT_SOURCES = ("narayanan2021", "korthikanti2022")
"""Sources whose runs used Megatron's default dropout of 0.1 (Korthikanti §4's activation count
includes the attention dropout mask and output, megatron-facts §7.1)."""
_SWIGLU_FAMILIES = ("llama", "mistral", "mixtral", "qwen", "deepseek")
# runs on uploaded text, so linear: whitespace is collapsed first and every gap is " ?" (the old
# `\s*(...)?\s*~?\s*` backtracked cubically: 4 000 spaces after "vocab" took 70 s)
_BLOOM_VOCAB_TEXT = re.compile(r"vocab\w* ?(?:=|~|of|size)? ?~? ?250 ?k", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_LOG_ARCH = "arguments block"
_COLUMNS = (
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "vocab_size",
    "num_experts",
    "moe_top_k",
    "moe_ffn_hidden_size",
)


class ArchSkip(Exception):
    """The row's architecture is incomplete or contradicts its catalog entry."""


def whole_number(row: Mapping[str, str], key: str) -> int | None:
    """The column as a whole number (None where empty); a ValueError naming the column and
    what to send otherwise ("8.0" is 8; "8.5", "true", "1_0" and "٨" are errors)."""
    value = (row.get(key) or "").strip()
    if not value:
        return None
    number = read_decimal(value)  # ASCII only: float() reads '1_0' as 10 and '٨' as 8
    if number is None or not number.is_integer():
        raise ValueError(
            f"{key}={value!r} is not a whole number: send one such as 8 {IN_WHOLE_DIGITS}, "
            "or leave it empty"
        )
    return int(number)


_int = whole_number


def _catalog_value(model: ModelSpec, column: str) -> int | None:
    if column == "num_query_groups":
        return model.query_groups
    if column == "moe_top_k":
        return model.moe_router_topk if model.is_moe else None
    if column == "moe_ffn_hidden_size":
        return model.expert_ffn_hidden_size if model.is_moe else None
    if column == "num_experts":
        return model.num_experts if model.is_moe else None
    value = getattr(model, column)
    return None if value is None else int(value)


def _row_value(row: Mapping[str, str], column: str) -> int | None:
    value = _int(row, column)
    if column == "num_query_groups" and value is None and _int(row, "num_attention_heads"):
        return None  # empty = not stated here (MHA only by Megatron's default, not a fact)
    if column == "num_experts" and value is not None and value <= 1:
        return None
    return value


def from_catalog(
    row: Mapping[str, str], name: str, catalog: ModelSpec
) -> tuple[ModelSpec, list[str]]:
    """The catalog model with the row's own num_layers for proxies; the filled columns."""
    proxy = "proxy" in name.lower()
    filled: list[str] = []
    for column in _COLUMNS:
        given = _row_value(row, column)
        known = _catalog_value(catalog, column)
        if given is None:
            if known is not None:
                filled.append(column)
            continue
        if column == "num_layers" and proxy:
            continue
        if known != given:
            raise ArchSkip(
                f"{column}={given} contradicts catalog model {catalog.name} ({column}={known})"
            )
    layers = _int(row, "num_layers") or catalog.num_layers
    model = replace(catalog, name=name, num_layers=layers)
    return model, filled


def _log_flags(row: Mapping[str, str]) -> dict[str, str]:
    """key=value pairs of other_metrics (the log parser writes the model flags there)."""
    out: dict[str, str] = {}
    for part in (row.get("other_metrics") or "").split(";"):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _fraction(text: str | None, default: float) -> float:
    """A dropout flag as logged, or ``default`` where absent or not a number in [0, 1)."""
    value = read_decimal(text) if text is not None else default  # ASCII decimal, as elsewhere
    return value if value is not None and 0.0 <= value < 1.0 else default


def _true(text: str) -> bool:
    return text.strip().lower() in ("true", "1", "yes")


_WINDOW = re.compile(r"^\(?\s*(-?\d+)\s*,\s*(-?\d+)\s*\)?$")


def _variant_fields(flags: Mapping[str, str]) -> dict[str, object]:
    """The activation and attention variants a log's arguments state (megatron-facts flags
    table; catalog-facts §1.6): Megatron prints ``window_size`` as ``(127, 0)`` and unset
    settings as ``None``. A value that does not read is left at ModelSpec's default."""
    out: dict[str, object] = {}
    for key in ("quick_geglu", "squared_relu"):
        if key in flags:
            out[key] = _true(flags[key])
    for key in ("glu_linear_offset", "activation_func_clamp_value"):
        value = read_decimal(flags[key]) if key in flags else None
        if value is not None and (key != "glu_linear_offset" or value != 0.0):
            out[key] = value
    window = _WINDOW.match(flags.get("window_size", "").strip())
    if window:
        out["window_size"] = (int(window.group(1)), int(window.group(2)))
        freq = flags.get("window_attn_skip_freq", "").strip()
        if freq.isdigit() and int(freq) >= 1:
            out["window_attn_skip_freq"] = int(freq)
    if flags.get("softmax_type", "").strip() in ("off-by-one", "learnable"):
        out["softmax_type"] = flags["softmax_type"].strip()
    return out


def from_columns(row: Mapping[str, str], name: str) -> tuple[ModelSpec, list[str]]:
    """The model from the row's own columns (plus the sourced completions above)."""

    def need(key: str) -> int:
        value = _int(row, key)
        if value is None:
            raise ArchSkip(f"{key} is missing")
        return value

    notes: list[str] = []
    h = need("hidden_size")
    experts = _int(row, "num_experts")
    moe_ffn = _int(row, "moe_ffn_hidden_size")
    shared = _int(row, "moe_shared_experts")
    kwargs: dict[str, object] = {}
    if experts is not None and experts > 1:
        topk = _int(row, "moe_top_k")
        if topk is None:
            raise ArchSkip("moe_top_k is missing for an MoE model")
        kwargs.update(num_experts=experts, moe_router_topk=topk, moe_ffn_hidden_size=moe_ffn)
        if shared:
            kwargs["moe_shared_expert_intermediate_size"] = shared * (
                moe_ffn or need("ffn_hidden_size")
            )
    vocab = _int(row, "vocab_size")
    if vocab is None and "bloom" in name.lower():
        text = " ".join(row.get(k) or "" for k in ("notes", "arch_source", "source_ref"))
        if _BLOOM_VOCAB_TEXT.search(_SPACES.sub(" ", text)):
            vocab = BLOOM_VOCAB
            notes.append(
                f"vocab_size={BLOOM_VOCAB} (row text states 'vocab ~250k'; BLOOM tokenizer)"
            )
    if vocab is None:
        raise ArchSkip("vocab_size is missing")
    flags = _log_flags(row)
    from_log = _LOG_ARCH in (row.get("arch_source") or "")
    lower = name.lower()
    gpt_like = not any(k in lower for k in _SWIGLU_FAMILIES)
    swiglu = not gpt_like
    norm = "LayerNorm" if gpt_like else "RMSNorm"
    pos = "learned_absolute" if "gpt" in lower else "rope"
    untie = not gpt_like
    # the Megatron papers' runs kept Megatron's --attention-dropout / --hidden-dropout default
    # of 0.1 (megatron-facts §1 table): Korthikanti §4 counts their dropout masks (§7.1)
    dropout = 0.1 if (row.get("source_id") or "") in DROPOUT_DEFAULT_SOURCES else 0.0
    if from_log or any(k in flags for k in ("swiglu", "normalization", "position_embedding_type")):
        # Megatron's defaults for flags the arguments block leaves out (megatron-facts §1.4)
        swiglu = _true(flags.get("swiglu", "False"))
        norm = flags.get("normalization", "LayerNorm")
        pos = flags.get("position_embedding_type", "learned_absolute")
        untie = _true(flags.get("untie_embeddings_and_output_weights", "False"))
        kwargs.update(_variant_fields(flags))
        notes.append("model flags from the log's arguments (other_metrics)")
    model = ModelSpec(
        name=name,
        num_layers=need("num_layers"),
        hidden_size=h,
        ffn_hidden_size=need("ffn_hidden_size"),
        num_attention_heads=need("num_attention_heads"),
        num_query_groups=_int(row, "num_query_groups"),
        vocab_size=vocab,
        swiglu=swiglu,
        normalization=norm,  # type: ignore[arg-type]
        position_embedding_type=pos,  # type: ignore[arg-type]
        untie_embeddings_and_output_weights=untie,
        attention_dropout=_fraction(flags.get("attention_dropout"), dropout),
        hidden_dropout=_fraction(flags.get("hidden_dropout"), dropout),
        **kwargs,  # type: ignore[arg-type]
    )
    return model, notes


def row_model(
    row: Mapping[str, str], lookup: Callable[[str], ModelSpec | None] | None
) -> tuple[ModelSpec, str]:
    """The row's model and a note on where its fields came from ('' = all from the row).

    The row's own columns come first; the catalog is asked only when they are incomplete."""
    name = (row.get("model_name") or "").strip() or "unnamed"
    try:
        model, notes = from_columns(row, name)
        return model, "; ".join(notes)
    except ArchSkip:
        catalog = lookup(name) if lookup is not None and name != "unnamed" else None
        if catalog is None:
            raise
    model, filled = from_catalog(row, name, catalog)
    return model, f"architecture from catalog {catalog.name} (filled: {', '.join(filled)})"
