"""Published layout sweeps: the stated layouts are priced and ranked (bench/published_sweeps.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.five_runs_report import _sweep_bar
from bench.published_sweeps import (
    LayoutSweep,
    SweepPoint,
    cp_figure_sweeps,
    dsv3_ladder,
    evaluate_sweep,
    headline_sweeps,
    simumax_sensitivity,
    simumax_sweeps,
    summarise_sweeps,
)
from bench.published_sweeps_report import INVENTORY, point_breakdown, sweeps_markdown
from models_db.catalog import load_model
from models_db.profiles import load_profile
from planner.search.evaluate import evaluate_layouts


def test_simumax_sweeps_are_the_stated_layouts_of_a_12_layer_llama3_70b() -> None:
    sweeps = simumax_sweeps()
    assert [s.sweep_id.rsplit("_", 1)[1] for s in sweeps] == ["4mb", "8mb", "32mb"]
    full = load_model("llama3.1-70b")
    for s in sweeps:
        assert s.model == replace(full, num_layers=12)
        assert s.cluster.num_gpus == 8 and s.cluster.gpu.name == "b200-sxm-180gb"
        assert [(p.layout.tp, p.layout.dp) for p in s.points] == [(2, 4), (4, 2), (8, 1)]
        # the micro-batch count per DP rank is what the source holds fixed
        counts = {p.job.global_batch_size // p.layout.dp for p in s.points if p.job}
        assert counts == {int(s.sweep_id.rsplit("_", 1)[1].removesuffix("mb"))}
        assert not any(p.job and p.job.tp_comm_overlap for p in s.points)  # Megatron default
    assert [s.points[2].published for s in sweeps] == [0.65, 0.62, 0.65]


def test_headline_has_every_sweep_and_the_variants_stay_out() -> None:
    ids = [s.sweep_id for s in headline_sweeps()]
    assert len(ids) == len(set(ids)) == 10
    assert "megatron_cp_figure_bf16_mha_32k" in ids and "dsv3_gb200_stack_ladder" in ids
    assert all(not s.headline for s in simumax_sensitivity())
    assert all(s.headline for s in headline_sweeps())


def test_cp_figure_recomputes_only_its_baseline() -> None:
    for s in cp_figure_sweeps():
        assert s.points[0].label == s.reference == "tp8 cp1"
        assert [p.layout.recompute for p in s.points] == ["full"] + ["none"] * (len(s.points) - 1)
        assert all(p.layout.num_gpus == 256 for p in s.points)


def test_dsv3_ladder_changes_only_stack_fields() -> None:
    ladder = dsv3_ladder()
    layouts = [p.layout for p in ladder.points]
    base = layouts[0]
    for lay in layouts[1:]:
        assert (
            replace(
                lay,
                moe_dispatcher=base.moe_dispatcher,
                cuda_graphs=base.cuda_graphs,
                recompute_modules=base.recompute_modules,
            )
            == base
        )
    assert [p.published for p in ladder.points] == sorted(p.published for p in ladder.points)


def test_evaluate_sweep_prices_the_stated_layouts_through_the_public_api() -> None:
    sweep = simumax_sweeps()[2]
    out = evaluate_sweep(sweep)
    ref, _, tp8 = out["points"]
    assert ref["predicted_relative"] == 1.0 and ref["published_relative"] == 1.0
    point = sweep.points[2]
    assert point.job is not None
    (ev,) = evaluate_layouts(
        sweep.model,
        sweep.cluster,
        point.job,
        [point.layout],
        load_profile(sweep.cluster.gpu),
        threshold=1.0,
    )
    assert tp8["predicted_tokens_per_s_per_gpu"] == pytest.approx(
        ev["performance"]["tokens_per_s_per_gpu"]
    )
    assert tp8["ratio"] == pytest.approx(tp8["predicted_relative"] / 0.65)
    assert out["spearman"] == pytest.approx(1.0)  # TP2 > TP4 > TP8 in both


def test_spearman_follows_the_published_order_not_the_prediction() -> None:
    """The same stated layouts with the published order reversed rank at -1: the figure
    compares two orders and can fail."""
    sweep = simumax_sweeps()[0]
    reversed_pub = tuple(
        replace(p, published=value) for p, value in zip(sweep.points, (1.0, 1.2, 1.5), strict=True)
    )
    out = evaluate_sweep(replace(sweep, points=reversed_pub))
    assert out["spearman"] == pytest.approx(-1.0)
    assert not out["order_agrees"]


def test_two_point_sweeps_report_the_order_only() -> None:
    pair = cp_figure_sweeps()[2]
    assert len(pair.points) == 2
    out = evaluate_sweep(pair)
    assert out["spearman"] is None
    assert out["order_agrees"] == (out["points"][1]["predicted_relative"] > 1.0)


def _result(name: str, rho: float | None, agrees: bool = True) -> dict[str, object]:
    points = [
        {"label": "a", "ratio": 1.0},
        {"label": "b", "ratio": 1.1},
        {"label": "c", "ratio": 0.8},
    ]
    return {
        "sweep": name,
        "headline": True,
        "spearman": rho,
        "order_agrees": agrees,
        "reference": "a",
        "points": points if rho is not None else points[:2],
    }


def test_summary_takes_the_worst_ranked_sweep_and_counts_pairs() -> None:
    results = [_result("x", 1.0), _result("y", 0.5), _result("p", None, agrees=False)]
    s = summarise_sweeps(results)  # type: ignore[arg-type]
    assert (s["sweeps"], s["points"], s["min_spearman"], s["worst_sweep"]) == (2, 6, 0.5, "y")
    assert s["below_bar"] == ["y"] and (s["pairs"], s["pairs_order_agrees"]) == (1, 0)
    # |ratio - 1| of the non-reference points: 0.1, 0.2, 0.1, 0.2, 0.1
    assert s["median_abs_ratio_error"] == pytest.approx(0.1)


def test_scoreboard_bar_counts_the_layout_sweeps() -> None:
    s = summarise_sweeps([_result("x", 1.0), _result("y", 0.5)])  # type: ignore[arg-type]
    bar = _sweep_bar({"summary": s}, {"weak": 0.9})
    assert bar["number"] == "min 0.50 (y)"
    assert bar["met"] == "NOT met"
    assert "2 layout sweeps" in bar["measured_on"] and "6 points" in bar["measured_on"]
    good = summarise_sweeps([_result("x", 1.0)])  # type: ignore[arg-type]
    assert _sweep_bar({"summary": good}, {})["met"] == "met"
    assert _sweep_bar(None, {})["met"] == "not measurable"


def test_breakdown_sums_to_the_step_and_the_page_renders() -> None:
    sweep = simumax_sweeps()[2]
    row = point_breakdown(sweep, "tp8 dp1")
    steps = sum(v for k, v in row.items() if k.startswith("step: "))
    assert steps == pytest.approx(row["step per micro-batch"], rel=0.05)
    parts = ("attention GEMMs", "MLP GEMMs", "core attention", "memory-bound ops", "logits + loss")
    assert sum(row[k] for k in parts) == pytest.approx(row["step: compute_s"], rel=1e-6)
    assert row["TP message MiB"] == pytest.approx(64.0)  # 4096 tokens x 8192 x 2 B
    results = [evaluate_sweep(s) for s in (sweep, cp_figure_sweeps()[2])]
    payload = {
        "summary": summarise_sweeps(results),
        "results": results,
        "sensitivity": [],
        "diagnosis": {"simumax_32mb": {"tp8 dp1": row}},
    }
    text = "\n".join(sweeps_markdown(payload))
    assert "simumax_b200_llama3_70b_12l_32mb" in text and "## Layout sweeps" in text
    assert len(INVENTORY) >= 10


def test_a_point_the_rules_reject_stops_the_bench() -> None:
    sweep = simumax_sweeps()[0]
    bad = SweepPoint(label="tp3", layout=replace(sweep.points[0].layout, tp=3), published=1.0)
    broken = LayoutSweep(**{**_fields(sweep), "points": (*sweep.points, bad)})
    with pytest.raises(SystemExit, match="tp3"):
        evaluate_sweep(broken)


def _fields(sweep: LayoutSweep) -> dict[str, object]:
    return {f: getattr(sweep, f) for f in LayoutSweep.__dataclass_fields__}
