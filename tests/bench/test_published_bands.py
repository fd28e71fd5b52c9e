"""The published check's prediction bands (bench/published_bands.py, brief bandpub9): coverage
arithmetic and the flags read from the calibration rows (that the band is the one a user gets:
tests/app/planning/test_published_bands_api.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bench.published_bands import (
    band_position,
    band_summary,
    calibration_rows,
    coverage,
    outside,
)
from models_db.catalog import cluster_spec, load_model
from planner.specs import Layout, TrainingJob


def test_band_position_is_published_over_the_nearest_edge() -> None:
    assert band_position(100.0, 90.0, 110.0) is None
    assert band_position(90.0, 90.0, 110.0) is None  # an edge is inside
    assert band_position(121.0, 90.0, 110.0) == pytest.approx(1.1)
    assert band_position(45.0, 90.0, 110.0) == pytest.approx(0.5)


def _row(case: str, inside: bool, *, headline: bool = True, flags: int = 0) -> dict[str, Any]:
    return {
        "case": case,
        "series": "s1" if case < "c" else "s2",
        "headline": headline,
        "source": "megatron_readme_h100: x",
        "gpu": "h100-sxm-80gb",
        "band": {
            "regime": "all",
            "layout_regime": "moe/multi-node/cp=1/bf16",
            "fallback": "few rows",
            "inside": inside,
            "miss": None if inside else 1.2,
            "extrapolation": ["w"] * flags,
            "missing_flags": [],
        },
    }


def test_coverage_counts_the_cases_inside_and_the_median_miss() -> None:
    rows = [_row("a1", True), _row("a2", False), _row("b1", True), _row("c1", False)]
    by_series = coverage(rows, lambda r: r["series"])
    assert by_series["s1"] == {
        "n": 3,
        "inside": 2,
        "coverage": 2 / 3,
        "below": 0,
        "above": 1,
        "median_factor": 1.2,
    }
    assert by_series["s2"]["coverage"] == 0.0
    assert coverage([_row("a1", True)], lambda r: "x")["x"]["median_factor"] is None


def test_a_miss_below_the_band_counts_by_its_inverse() -> None:
    low, high = _row("a1", False), _row("a2", False)
    low["band"]["miss"], high["band"]["miss"] = 0.5, 1.5
    c = coverage([low, high], lambda r: "x")["x"]
    assert (c["below"], c["above"]) == (1, 1)
    assert c["median_factor"] == pytest.approx(1.75)  # median of 2.0 and 1.5


def test_the_summary_keeps_the_out_of_headline_cases_apart_and_splits_by_flags() -> None:
    rows = [
        _row("a1", True),
        _row("a2", False, flags=1),
        _row("a3", True, headline=False),
        {"case": "over-hbm", "headline": True, "series": "s1", "band": None},
    ]
    s = band_summary(rows)
    assert s["headline"]["n"] == 2 and s["headline"]["coverage"] == 0.5
    assert s["out_of_headline"]["n"] == 1
    assert s["flagged"]["no flag"]["coverage"] == 1.0
    assert s["flagged"]["plan flags extrapolation"]["coverage"] == 0.0
    assert s["campaign"]["a new campaign"]["n"] == 2  # the README rows fitted nothing
    assert s["kind"]["moe"]["n"] == 2


def test_a_case_outside_the_calibration_rows_is_found_from_the_rows() -> None:
    """Read from the rows, not the planner's summary of them: GB200 ran in no row, no MoE row
    has 256 experts, no row ran cp 4, and no row ran CUDA graphs."""
    dsv3 = load_model("deepseek-v3")
    found = SimpleNamespace(
        model=dsv3,
        cluster=cluster_spec("gb200-186gb", 256, gpus_per_node=64),
        job=TrainingJob(seq_length=4096, global_batch_size=256),
        layout=Layout(tp=1, pp=8, cp=4, ep=8, dp=8, cuda_graphs="partial"),
    )
    why = outside(found, calibration_rows())  # type: ignore[arg-type]
    assert set(why) >= {
        "not fitted to measurements of this GPU",
        "fine-grained MoE",
        "cp=4",
        "cuda_graphs=partial",
    }
    h100 = SimpleNamespace(
        model=load_model("llama3.1-70b"),
        cluster=cluster_spec("dgx-h100", 64),
        job=found.job,
        layout=Layout(tp=8, pp=8),
    )
    assert outside(h100, calibration_rows()) == {}  # type: ignore[arg-type]


def test_the_results_page_names_the_coverage() -> None:
    from bench.published_bands import bands_markdown

    rows = [_row("a1", True), _row("a2", False, flags=1)]
    for r in rows:
        r["published"] = 100.0
        r["band"]["band"] = [90.0, 110.0]
    text = "\n".join(bands_markdown(band_summary(rows), rows))
    assert "Headline coverage of the shipped bands (in-sample for tau): 1 of 2 (50 %)" in text
    row = "| a2 | yes | all (moe/multi-node/cp=1/bf16) | 90-110 | 100 | 1.2000 | n/a | w |"
    assert row in text
