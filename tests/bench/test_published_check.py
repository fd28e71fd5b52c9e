"""The published check pins what each source states (bench/published_check.py, issue 12)."""

from __future__ import annotations

from bench.published_cases import dsv3_gb200_cases
from bench.published_check import (
    csv_cases,
    run_case,
    stack_text,
    stated_cp,
)
from models_db.profiles import load_profile
from planner.search.evaluate import evaluate_layouts


def test_the_readme_rows_run_the_stack_their_source_and_era_give() -> None:
    """The README names --tp-comm-overlap; it names no --cross-entropy-loss-fusion, which was
    off by default in core 0.8 (mechanisms-facts §8), so the loss is the unfused one (§5.2)."""
    readme = [c for c in csv_cases() if c.series.startswith("megatron_readme_h100")]
    assert len(readme) == 11
    for case in readme:
        assert case.job.tp_comm_overlap
        assert case.job.cross_entropy_fusion == "unfused"
    text = stack_text("megatron_readme_h100")
    assert "tp_comm_overlap=yes (stated)" in text
    assert "cross_entropy_fusion=unfused (era default)" in text


def test_cp_is_pinned_only_where_tp_pp_and_dp_fill_the_gpus() -> None:
    row = {"source_id": "megatron_readme_h100", "tp": "8", "pp": "2", "dp": "48", "cp": ""}
    assert stated_cp(row | {"num_gpus": "768"}, 1) == 1  # README weak scaling: DP = 48
    assert stated_cp(row | {"num_gpus": "1536"}, 1) is None  # room left for cp: free
    strong = {"source_id": "megatron_readme_h100", "tp": "", "pp": "", "dp": "", "cp": ""}
    assert stated_cp(strong | {"num_gpus": "96"}, 1) is None
    weak = next(c for c in csv_cases() if c.case_id == "T0045")
    assert weak.constraints.cp == 1 and weak.free == "vpp mbs recompute"


def test_dsv3_gb200_stated_layout_is_a_legal_megatron_layout() -> None:
    """MLM-DSV3's TP1/PP8/VPP4/EP32 with Et|(tt|)*30L passes every rule; only our memory
    estimate may reject it, and then the check prices it anyway and says so."""
    case = dsv3_gb200_cases()[0]
    assert case.stated_layout is not None
    (ev,) = evaluate_layouts(
        case.model,
        case.cluster,
        case.job,
        [case.stated_layout],
        load_profile(case.cluster.gpu),
        threshold=1.0,
    )
    assert ev["valid"], ev["violations"]
    out = run_case(case)
    assert (out["ratio"] is None) == ("ratio_over_hbm" in out)
    assert (out["ratio"] or out["ratio_over_hbm"]) > 0
