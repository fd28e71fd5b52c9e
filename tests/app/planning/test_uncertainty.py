"""Every prediction carries its interval and extrapolation warnings (issue 12 item 9)."""

from __future__ import annotations

from app.planning.compute import evaluate_request
from app.planning.reports import LayoutReport
from models_db.intervals import load_interval_table
from tests.app.calibration.test_suggestions import EIGHT_B as REQUEST


def test_the_shipped_table_is_built_from_held_out_residuals() -> None:
    table = load_interval_table()
    assert table is not None
    assert "leave-one-source-out" in table.source["residuals"]
    assert table.bands["all"].low < 1 < table.bands["all"].high


def test_an_evaluation_carries_its_band_inside_the_calibrated_data() -> None:
    perf = evaluate_request(REQUEST).raw["performance"]
    low, high = perf["tokens_per_s_per_gpu_interval"]
    assert low < perf["tokens_per_s_per_gpu"] < high
    s_low, s_high = perf["step_time_interval_s"]
    assert s_low < perf["step_time_s"] < s_high
    assert perf["extrapolation"] == []
    report = LayoutReport.model_validate(evaluate_request(REQUEST).raw)
    assert report.performance is not None
    assert report.performance.extrapolation == []


def test_a_transferred_gpu_and_a_long_sequence_say_they_extrapolate() -> None:
    perf = evaluate_request({**REQUEST, "gpu": "b200-sxm-180gb", "seq_length": 65536, "cp": 2}).raw[
        "performance"
    ]
    text = " | ".join(perf["extrapolation"])
    assert "not fitted to measurements" in text and "sequence length 65536" in text
