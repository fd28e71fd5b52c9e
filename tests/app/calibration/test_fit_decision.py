"""A user calibration is kept only where it predicts held-out rows better than the prior."""

from __future__ import annotations

from app.calibration.honest import calibrate_gpu_rows
from planner.performance.step_time import default_profile
from tests.planner.calibration.test_fit import synthetic
from tests.planner.fixtures import H100, LLAMA_8B, LLAMA_70B


def _two_sweeps(scale_a: float, scale_b: float) -> list:
    rows = synthetic(default_profile(H100), "a", LLAMA_8B, scale=scale_a)
    rows += synthetic(default_profile(H100), "b", LLAMA_70B, scale=scale_b)
    return rows


def test_a_cluster_slower_everywhere_is_fitted() -> None:
    prior = default_profile(H100)
    profile, report = calibrate_gpu_rows(_two_sweeps(0.8, 0.8), prior)
    assert report["decision"]["kept_prior"] is False
    assert report["moved"]
    assert profile != prior


def test_sweeps_that_contradict_each_other_keep_the_prior() -> None:
    """One sweep 30 % slower than the prior, the other 30 % faster (what the model cannot
    explain): a fit on either predicts the other worse than the prior does, so the held-out
    error rises and the calibration returns the prior, saying why."""
    prior = default_profile(H100)
    profile, report = calibrate_gpu_rows(_two_sweeps(0.7, 1.3), prior)
    cv = report["cross_validation"]
    assert cv["median_ape_after"] > cv["median_ape_before"]
    assert report["decision"]["kept_prior"] is True
    assert profile == prior
    assert report["moved"] == []
    assert "prior profile is kept" in report["decision"]["reason"]
