"""The new-campaign band measured out of sample on published runs (bench/published_bands_spread):
a published campaign never informs its own nested band."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from bench.calibration import SHIPPED, bands_of
from bench.published_bands import calibration_rows
from bench.published_bands_spread import (
    BuildBands,
    nested_summary,
    published_campaign,
    published_nested,
    published_offsets,
    shared_nested,
)
from planner.calibration.intervals import IntervalTable
from tests.planner.calibration.test_intervals import CALIBRATED
from tests.planner.calibration.test_intervals_transfer import MODEL_BAND, TRANSFER, table

FITTED = {("dgxc", "h100-sxm-80gb")}


def case(name: str, source: str, ratio: float, *, moe: bool = False) -> dict[str, Any]:
    return {
        "case": name,
        "source": source,
        "gpu": "h100-sxm-80gb",
        "headline": True,
        "ratio": ratio,  # predicted / published
        "predicted": 100.0,
        "band": {
            "regime": "all",
            "layout_regime": "moe/x" if moe else "dense/x",
            "extrapolation": ["w"] if moe else [],
        },
    }


def cases(wild: float) -> list[dict[str, Any]]:
    out = [case(f"r{i}", "readme: a", 1.08 + 0.01 * i) for i in range(3)]
    out += [case("m1", "moe card: b [read]", 0.9, moe=True), case("m2", "other: c", 1.05)]
    out += [case("w1", "wild: d", wild, moe=True), case("d1", "dgxc: e", 1.0)]
    return out


def shipped() -> IntervalTable:
    return table(TRANSFER)


def test_a_published_case_is_grouped_by_its_source_on_its_gpu() -> None:
    assert published_campaign(case("x", "readme_h100: text", 1.0)) == "readme_h100|h100-sxm-80gb"
    long = case("y", "mechanisms-facts §3.5: MLM-DSV3 final row [read]", 1.0)
    assert published_campaign(long) == "mechanisms-facts §3.5: MLM-DSV3 final row|h100-sxm-80gb"


def test_campaigns_in_the_fit_never_enter_the_estimate() -> None:
    offs = published_offsets(cases(1.0), shipped().bands, FITTED)
    assert {o.campaign.split("|")[0] for o in offs} == {"readme", "moe card: b", "other", "wild"}
    readme = next(o for o in offs if o.campaign.startswith("readme"))
    centre = MODEL_BAND["log_centre"]
    expected = sum(-math.log(r) - centre for r in (1.08, 1.09, 1.10)) / 3
    assert readme.rows == 3 and readme.mean_log_deviation == pytest.approx(expected)


def test_a_held_out_campaign_never_leaks_into_its_own_band() -> None:
    """The wild campaign's own ratio moves every other campaign's tau but never its own."""
    calm = {c["case"]: c for c in published_nested(cases(1.0), shipped(), FITTED)}
    wild = {c["case"]: c for c in published_nested(cases(3.0), shipped(), FITTED)}
    assert wild["w1"]["tau"] == pytest.approx(calm["w1"]["tau"])
    assert (wild["w1"]["low"], wild["w1"]["high"]) == pytest.approx(
        (calm["w1"]["low"], calm["w1"]["high"])
    )
    assert wild["r0"]["tau"] > calm["r0"]["tau"] + 0.05  # the others' estimate does see it
    assert wild["w1"]["inside"] is False and calm["w1"]["inside"] is True
    assert wild["w1"]["df"] == 1 + 3 - 1  # the table's shared campaign + 3 other new ones - 1


def test_the_summary_reports_coverage_next_to_width() -> None:
    summ = nested_summary(published_nested(cases(1.0), shipped(), FITTED))
    assert summ["all headline"]["n"] == 7
    assert summ["new campaigns"]["n"] == 6 and summ["campaigns in the fit"]["n"] == 1
    assert summ["MoE"]["n"] == 2
    assert 0 < summ["all headline"]["median_width"] < 1


def test_a_held_out_shared_source_never_informs_its_own_tau() -> None:
    """bench.calibration's nested shared-row coverage: a source's own ratios move the other
    sources' tau, never its own (its band is built from the other sources alone)."""
    rows = list(calibration_rows())
    data = {
        "low_quantile": 0.1,
        "high_quantile": 0.9,
        "min_rows": 10,
        "calibrated": CALIBRATED,
    }

    def build_for(ratio: np.ndarray) -> BuildBands:
        def build(train: list[int]) -> tuple[dict[str, Any], float]:
            sub = [rows[i] for i in train]
            return bands_of(sub, ratio[train], "model", SHIPPED), SHIPPED[0].within_log_sd

        return build

    rng = np.random.default_rng(3)
    calm = np.exp(rng.normal(0, 0.05, len(rows)))
    wild = calm.copy()
    held = "nemo_perf_24.07"
    wild[[i for i, m in enumerate(rows) if m.source_id == held]] *= 2.0
    a = shared_nested(data, rows, calm, build_for(calm), [], FITTED)["sources"]
    b = shared_nested(data, rows, wild, build_for(wild), [], FITTED)["sources"]
    assert b[held]["tau"] == pytest.approx(a[held]["tau"])
    assert b[held]["inside"] < a[held]["inside"]
    other = next(s for s in a if s != held)
    assert b[other]["tau"] > a[other]["tau"] + 0.1  # it does enter the others' estimate
