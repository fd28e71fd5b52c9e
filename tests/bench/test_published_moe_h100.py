"""The H100 MoE cases of the published check pin what their cards state (issue 12)."""

from __future__ import annotations

from bench.published_check import moe_summary, run_case
from bench.published_moe_h100 import (
    breakdown,
    derived_gbs,
    gpt_oss_cases,
    moe_h100_cases,
    qwen3_cases,
)
from models_db.catalog import load_model
from planner.specs import Layout


def test_each_graph_pair_differs_only_in_cuda_graphs() -> None:
    for pair in (qwen3_cases(), gpt_oss_cases()):
        eager, graphed = pair
        assert eager.stated_layout is not None and graphed.stated_layout is not None
        assert eager.stated_layout.cuda_graphs == "none"
        assert graphed.stated_layout.cuda_graphs == "partial"
        assert eager.job == graphed.job and eager.constraints.etp == 1
        assert eager.constraints.moe_a2a_overlap is False  # Megatron's default, not stated


def test_batch_comes_from_time_times_tflops() -> None:
    """Qwen3-30B-A3B graphed: 274 TFLOP/s x 16 GPUs x 0.484 s = 2.12 PFLOP per iteration, about
    22.6 sequences of 4096 at our FLOPs per token: 24, the nearest multiple of dp 4."""
    q = load_model("qwen3-30b-a3b")
    gbs = derived_gbs(q, Layout(tp=2, pp=2, ep=4, dp=4), 16, 484.0, 274.0)
    assert gbs == 24
    assert derived_gbs(q, Layout(tp=2, pp=2, ep=4, dp=4), 16, 1.0, 1.0) == 4  # at least dp


def test_moe_rows_count_in_the_moe_summary() -> None:
    cases = moe_h100_cases()
    head = [c for c in cases if c.headline]
    assert {c.case_id for c in head} >= {
        "qwen3-30b-a3b-h100-tp2pp2ep4-eager",
        "gpt-oss-20b-h100-tp2pp4ep4-graphs",
        "deepseek-v3-h100-1024-moe-card",
    }
    rows = [run_case(c) for c in head[:2]]
    summary = moe_summary(rows)
    assert summary["rows"] == 2 and summary["median_ape"] is not None


def test_breakdown_terms_sum_to_the_step() -> None:
    row = breakdown(qwen3_cases()[0])
    terms = [k for k in row if k.endswith("_s") and k not in ("step_s", "published_s")]
    assert abs(sum(row[k] for k in terms) - row["step_s"]) < 1e-9 * row["step_s"] + 1e-12
    assert row["published_s"] == 0.623
