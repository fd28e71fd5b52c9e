"""Completing a measured row's architecture from a catalog, BLOOM text and log flags
(planner.calibration.measurement_arch via planner.calibration.measurements.parse_rows)."""

from __future__ import annotations

from planner.calibration.measurements import parse_rows
from planner.specs import ModelSpec
from tests.planner.fixtures import H100

GROK = ModelSpec(  # the catalog's Grok-1 shape (fake catalog: the test owns its numbers)
    name="grok-1",
    num_layers=64,
    hidden_size=6144,
    ffn_hidden_size=32768,
    num_attention_heads=48,
    num_query_groups=8,
    vocab_size=131072,
    num_experts=8,
    moe_router_topk=2,
    moe_ffn_hidden_size=32768,
)


def lookup(name: str) -> ModelSpec | None:
    return GROK if name.lower().startswith("grok") else None


def row(**over: str) -> dict[str, str]:
    base = {
        "row_id": "X1",
        "source_id": "dgxc_benchmarking_v25.04",
        "model_name": "Grok 1 314b (proxy)",
        "num_layers": "4",
        "seq_length": "4096",
        "gpu_type": "H100",
        "num_gpus": "16",
        "gpus_per_node": "8",
        "tp": "4",
        "pp": "1",
        "cp": "1",
        "ep": "4",
        "micro_batch_size": "1",
        "global_batch_size": "1024",
        "precision": "bf16",
        "tokens_per_sec_per_gpu": "12076.4",
        "reliability": "high",
    }
    base.update(over)
    return base


def test_without_lookup_a_row_lacking_architecture_is_skipped() -> None:
    ms, skipped = parse_rows([row()], lambda s: H100)
    assert ms == [] and "hidden_size is missing" in skipped[0].reason


def test_catalog_fills_the_missing_fields_and_keeps_the_proxy_layer_count() -> None:
    ms, _ = parse_rows([row()], lambda s: H100, model_lookup=lookup)
    m = ms[0].model
    assert (m.num_layers, m.hidden_size, m.num_experts, m.moe_router_topk) == (4, 6144, 8, 2)


def test_derivation_names_the_catalog_fields_used() -> None:
    ms, _ = parse_rows([row()], lambda s: H100, model_lookup=lookup)
    assert "catalog grok-1" in ms[0].derivation and "vocab_size" in ms[0].derivation


def test_a_row_contradicting_its_catalog_model_is_skipped() -> None:
    ms, skipped = parse_rows([row(hidden_size="8192")], lambda s: H100, model_lookup=lookup)
    assert ms == [] and "contradicts catalog" in skipped[0].reason


def test_a_full_size_row_must_match_the_catalog_layer_count() -> None:
    bad = row(model_name="Grok 1 314b", num_layers="60")
    ms, skipped = parse_rows([bad], lambda s: H100, model_lookup=lookup)
    assert ms == [] and "num_layers=60" in skipped[0].reason


def bloom_row(notes: str) -> dict[str, str]:
    return row(
        model_name="BLOOM-style GPT (h=14336, L=70, size 176B)",
        num_layers="70",
        hidden_size="14336",
        ffn_hidden_size="57344",
        num_attention_heads="112",
        notes=notes,
    )


def test_bloom_vocabulary_comes_from_the_rows_own_text() -> None:
    ms, _ = parse_rows([bloom_row("tp8 pp12; vocab ~250k")], lambda s: H100)
    assert ms[0].model.vocab_size == 250_880 and "250k" in ms[0].derivation


def test_bloom_without_a_stated_vocabulary_stays_skipped() -> None:
    ms, skipped = parse_rows([bloom_row("tp8 pp12")], lambda s: H100)
    assert ms == [] and "vocab_size is missing" in skipped[0].reason


def test_log_rows_take_model_flags_from_other_metrics() -> None:
    r = row(
        model_name="",
        num_layers="32",
        hidden_size="4096",
        ffn_hidden_size="14336",
        num_attention_heads="32",
        num_query_groups="8",
        vocab_size="128256",
        ep="",
        other_metrics="swiglu=True; normalization=RMSNorm; position_embedding_type=rope",
        arch_source="Megatron-LM arguments block of this log",
    )
    m = parse_rows([r], lambda s: H100)[0][0].model
    assert (m.swiglu, m.normalization, m.position_embedding_type) == (True, "RMSNorm", "rope")


def test_log_rows_without_flags_are_at_megatron_defaults() -> None:
    r = row(
        model_name="",
        num_layers="24",
        hidden_size="2048",
        ffn_hidden_size="8192",
        num_attention_heads="16",
        vocab_size="50257",
        ep="",
        other_metrics="log_interval=10",
        arch_source="Megatron-LM arguments block of this log",
    )
    m = parse_rows([r], lambda s: H100)[0][0].model
    assert (m.swiglu, m.normalization, m.position_embedding_type) == (
        False,
        "LayerNorm",
        "learned_absolute",
    )


def gpt_row(source_id: str) -> dict[str, str]:
    return row(
        row_id=source_id,
        source_id=source_id,
        model_name="GPT-1.7B (Narayanan Table 1)",
        recompute="full",
        num_layers="24",
        hidden_size="2304",
        ffn_hidden_size="9216",
        num_attention_heads="24",
        vocab_size="51200",
        tp="1",
        ep="1",
        num_gpus="32",
        micro_batch_size="16",
        global_batch_size="512",
    )


def test_megatron_paper_rows_run_megatrons_default_dropout() -> None:
    ms, _ = parse_rows([gpt_row("narayanan2021"), gpt_row("megatron_readme_h100")], lambda s: H100)
    paper, other = (m.model for m in ms)
    assert (paper.attention_dropout, paper.hidden_dropout) == (0.1, 0.1)
    assert (other.attention_dropout, other.hidden_dropout) == (0.0, 0.0)


def test_a_logged_gpt_oss_row_keeps_its_window_sinks_and_activation() -> None:
    # a Megatron log's arguments block prints window_size as a tuple and unset values as None
    flags = (
        "swiglu=False;quick_geglu=True;squared_relu=False;glu_linear_offset=1.0;"
        "activation_func_clamp_value=7.0;window_size=(127, 0);window_attn_skip_freq=2;"
        "softmax_type=learnable;normalization=RMSNorm;position_embedding_type=rope"
    )
    logged = row(
        model_name="gpt-oss-20b",
        num_layers="24",
        hidden_size="2880",
        ffn_hidden_size="2880",
        num_attention_heads="64",
        num_query_groups="8",
        vocab_size="201088",
        ep="1",
        tp="1",
        arch_source="arguments block",
        other_metrics=flags,
    )
    ms, skipped = parse_rows([logged], lambda s: H100)
    assert not skipped, skipped
    model = ms[0].model
    assert model.quick_geglu and not model.swiglu and model.gated_linear_unit
    assert (model.glu_linear_offset, model.activation_func_clamp_value) == (1.0, 7.0)
    assert (model.window_size, model.window_attn_skip_freq) == ((127, 0), 2)
    assert model.softmax_type == "learnable"


def test_a_logged_row_with_megatron_defaults_keeps_vanilla_attention() -> None:
    flags = (
        "swiglu=True;quick_geglu=False;glu_linear_offset=0.0;window_size=None;softmax_type=vanilla"
    )
    logged = row(
        model_name="llama-like",
        hidden_size="4096",
        ffn_hidden_size="14336",
        num_attention_heads="32",
        num_query_groups="8",
        vocab_size="128256",
        ep="1",
        arch_source="arguments block",
        other_metrics=flags,
    )
    ms, skipped = parse_rows([logged], lambda s: H100)
    assert not skipped, skipped
    model = ms[0].model
    assert model.swiglu and model.window_size is None and model.softmax_type == "vanilla"
    assert model.glu_linear_offset == 0.0
