"""The band a response shows for a campaign the fit never saw (intervals + campaign_spread)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy.stats import t as student_t

from planner.calibration.intervals import IntervalTable, uncertainty
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.calibration.test_intervals import CALIBRATED, FITTED
from tests.planner.fixtures import H100, LLAMA_70B

MODEL_BAND: dict[str, float] = {
    "n": 100,
    "low": 0.9,
    "high": 1.1,
    "log_centre": 0.01,
    "log_sd": 0.06,
    "df": 3,
    "within_log_sd": 0.05,
    "centre_log_sd": 0.02,
}
TRANSFER: dict[str, Any] = {
    "log_sd": 0.1,
    "df": 11,
    "within_log_sd": 0.05,
    "campaigns": [
        {"campaign": "a|h100", "rows": 60, "mean_log_deviation": 0.02, "kind": "shared"},
        {"campaign": "b|h100", "rows": 9, "mean_log_deviation": -0.08, "kind": "published"},
    ],
}


def table(transfer: dict[str, Any] | None) -> IntervalTable:
    return IntervalTable.from_dict(
        {
            "low_quantile": 0.1,
            "high_quantile": 0.9,
            "min_rows": 10,
            "bands": {"all": MODEL_BAND},
            "calibrated": CALIBRATED,
            **({"transfer": transfer} if transfer else {}),
        }
    )


def run(t: IntervalTable, profile: Any = FITTED) -> dict[str, Any]:
    return uncertainty(
        t,
        LLAMA_70B,
        ClusterSpec(name="c", gpu=H100, num_gpus=64),
        TrainingJob(seq_length=4096, global_batch_size=256),
        Layout(tp=4, pp=2, dp=8),
        profile,
        tokens_per_s_per_gpu=1000.0,
        step_time_s=10.0,
    )


def test_a_table_with_a_transfer_spread_widens_the_band_and_says_why() -> None:
    out = run(table(TRANSFER))
    sd = math.sqrt(0.05**2 + 0.1**2 + 0.02**2)
    t = float(student_t.ppf(0.9, 11))
    expected = [1000 * math.exp(0.01 - t * sd), 1000 * math.exp(0.01 + t * sd)]
    assert out["tokens_per_s_per_gpu_interval"] == pytest.approx(expected)
    info = out["interval"]
    assert "widened for a campaign the fit never saw" in info["band"]
    assert "1 of published runs" in info["band"] and "11 degrees of freedom" in info["band"]
    assert info["between_campaign_log_sd"] == 0.1 and info["df"] == 11
    plain = run(table(None))["tokens_per_s_per_gpu_interval"]
    assert plain == pytest.approx([900.0, 1100.0])  # without it: the table's band as built


def test_a_calibrated_cluster_narrows_the_widened_band() -> None:
    level = {
        "n_rows": 8,
        "shrinkage": 0.6,
        "within_log_sd": 0.05,
        "log_sd": 0.01,
        "prior_log_sd": 0.022,
    }
    calibrated = FITTED.with_coefficients(provenance={"kind": "fitted", "cluster_level": level})
    wide = run(
        table(TRANSFER), default_profile(H100).with_coefficients(provenance={"kind": "fitted"})
    )
    narrow = run(table(TRANSFER), calibrated)
    (lo, hi), (nlo, nhi) = (
        wide["tokens_per_s_per_gpu_interval"],
        narrow["tokens_per_s_per_gpu_interval"],
    )
    assert lo < nlo < nhi < hi
    assert narrow["interval"]["cluster_level_narrowing"] < 1
    assert "narrowed x" in narrow["interval"]["band"]
    assert "cluster_level_narrowing" not in wide["interval"]
