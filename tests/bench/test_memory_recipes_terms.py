"""The term-by-term breakdown of bench.memory_recipes: the facts' activation sums against the
planner's, and the basis each published peak is compared on."""

from __future__ import annotations

import pytest

from bench.memory_recipes import published_peaks
from bench.memory_recipes_terms import _planner_layer_bytes, default_stack_lines, facts_layer_bytes
from models_db.catalog import load_model
from planner.layouts import LayoutBatch
from planner.specs import Layout, TrainingJob


@pytest.mark.parametrize(
    ("precision", "layout"),
    [
        ("bf16", Layout(tp=1, cp=2, dp=4)),
        ("bf16", Layout(tp=4, pp=4, dp=2)),
        ("fp8", Layout(tp=4, pp=4, vpp=5, dp=2)),
        ("fp8", Layout(tp=8, pp=4, dp=1)),
    ],
)
def test_dense_layer_matches_the_facts_sums(precision: str, layout: Layout) -> None:
    """mechanisms-facts §6.2: 12h + 4hg/a + 6F per token in bf16, 11h + 4hg/a + 5F in fp8."""
    model = load_model("llama3.1-70b")
    job = TrainingJob(seq_length=4096, global_batch_size=64, precision=precision)
    batch = LayoutBatch.from_layouts([layout])
    planner = _planner_layer_bytes(model, job, batch, moe=False, imbalance=1.0)
    facts = facts_layer_bytes(model, 4096, layout, fp8=precision == "fp8", moe=False, imbalance=1.0)
    assert planner == pytest.approx(facts, rel=1e-9)


def test_moe_layer_matches_the_facts_sums_without_qk_norm() -> None:
    """mechanisms-facts §6.3 per routed copy 2h + 6F_e + 4 (Mixtral: no QK norm, no shared
    experts); with EP the copies land on the expert ranks at the same count on average."""
    model = load_model("mixtral-8x7b")
    assert not model.qk_layernorm
    layout = Layout(tp=2, ep=8, etp=1, dp=8)
    job = TrainingJob(seq_length=4096, global_batch_size=64)
    batch = LayoutBatch.from_layouts([layout])
    planner = _planner_layer_bytes(model, job, batch, moe=True, imbalance=1.2)
    facts = facts_layer_bytes(model, 4096, layout, fp8=False, moe=True, imbalance=1.2)
    assert planner == pytest.approx(facts, rel=1e-9)


def test_llama_card_is_compared_on_allocated() -> None:
    """58.8 GB with and without expandable segments: an allocated peak, so the two rows agree
    (fragmentation is not part of the compared figure)."""
    peaks = {p["name"]: p for p in published_peaks()}
    llama = [p for name, p in peaks.items() if name.startswith("Llama3-70B")]
    assert len(llama) == 4 and all(p["compared_on"] == "allocated" for p in llama)
    oom, expandable = llama[0], llama[1]
    assert oom["compared_gb"] == pytest.approx(expandable["compared_gb"])
    assert oom["predicted_gb"] > expandable["predicted_gb"]  # the whole estimate still differs
    for p in llama:
        assert p["breakdown"]["activations"]["facts_mb_per_layer"] > 0


def test_default_stack_check_names_the_gradient_dtype() -> None:
    """Llama 3.1 8B CP2 on 8 H100: fp32 main gradients (Megatron's default) put the estimate
    over the HBM, bf16 gradients (the recipe's) under it."""
    lines = default_stack_lines()
    fp32 = next(line for line in lines if line.startswith("| fp32 |"))
    bf16 = next(line for line in lines if line.startswith("| bf16 |"))
    share = [float(line.split("|")[3].strip().removesuffix(" %")) for line in (fp32, bf16)]
    assert share[0] > 100.0 > share[1]
    assert Layout().grad_reduce_dtype == "fp32"  # the planner's default is the first row
