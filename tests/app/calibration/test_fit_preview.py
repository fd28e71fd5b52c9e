"""The calibration page's fit preview: why nothing could be fitted, in words a user can act on."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from app.calibration.fit import fit_preview
from planner.specs import SpecError

EXAMPLE = Path(__file__).parents[3] / "examples" / "measurements.csv"


def test_rows_of_another_gpu_name_it_and_the_fix() -> None:
    rows = list(csv.DictReader(EXAMPLE.open()))  # H100 runs, fitted for an A100 cluster
    with pytest.raises(SpecError, match=r"rows are of h100-sxm-80gb, not a100-sxm4-40gb: choose"):
        fit_preview(rows, "a100-sxm4-40gb")


def test_rows_of_the_cluster_gpu_fit() -> None:
    rows = list(csv.DictReader(EXAMPLE.open()))
    assert fit_preview(rows, "h100-sxm-80gb")["n_rows"] == len(rows)
