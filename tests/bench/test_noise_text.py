"""The result pages quote the calibration's shipped noise from the code, not from the day their
reading was written (bench.noise_text)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import bench.fidelity as fidelity
from bench.noise_text import PLACEHOLDER, shipped_noise
from bench.small_models import READING
from planner.calibration.regularised import FIT_NOISE, NOISE


def _quotes_the_shipped_pairs(text: str) -> bool:
    return all(
        f"sigma_w {n.within_log_sd:.3f}, sigma_b {n.shared_log_sd:.3f}" in text
        for n in (NOISE, FIT_NOISE)
    )


def test_the_sentence_names_both_pairs_from_the_code() -> None:
    assert _quotes_the_shipped_pairs(shipped_noise())


def test_the_small_models_reading_quotes_the_shipped_pairs() -> None:
    text = "\n".join(READING)
    assert PLACEHOLDER not in text
    assert _quotes_the_shipped_pairs(text)


def test_a_fidelity_rerun_keeps_its_reading_and_quotes_the_shipped_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(fidelity.RESULTS / "fidelity.json", tmp_path / "fidelity.json")
    monkeypatch.setattr(fidelity, "RESULTS", tmp_path)
    assert fidelity.main(["--keep"]) == 0
    page = (tmp_path / "fidelity.md").read_text(encoding="utf-8")
    assert "## Reading (issue 12, calib-design" in page
    assert PLACEHOLDER not in page
    assert _quotes_the_shipped_pairs(page)
