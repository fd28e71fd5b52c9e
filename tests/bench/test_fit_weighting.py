"""The fit weighting's rule (bench/fit_weighting.py): the grid choice, ties, the nested loop, and
that the shipped fit pair is the rule's choice on the shared rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import cast

import pytest

from bench.accuracy import data_path, load
from bench.fit_weighting import GRID, TIE, choose, inner_scores, loso_errors, nested, shipped_pair
from planner.calibration.fit import usable
from planner.calibration.measurements import Measurement
from planner.calibration.regularised import FIT_ROW_LOG_SD, FIT_SHARED_LOG_SD


def test_choose_takes_the_smallest_median_and_breaks_ties_toward_the_stronger_prior() -> None:
    assert choose({0.5: 0.040, 1.0: 0.030, 2.0: 0.035}) == 1.0
    # 0.0302 is within the 0.05-point tie of 0.030: the larger m (stronger prior) wins
    assert choose({0.5: 0.030, 1.0: 0.030 + 0.4 * TIE, 2.0: 0.031}) == 1.0
    assert choose({0.5: 0.030, 1.0: 0.030 + 2 * TIE}) == 0.5
    with pytest.raises(ValueError, match="grid point"):
        choose({})


def _rows(sources: Sequence[str], n: int = 3) -> list[Measurement]:
    fake = [SimpleNamespace(row_id=f"{s}{i}", source_id=s) for s in sources for i in range(n)]
    return cast(list[Measurement], fake)


def _fake_loso(rows: Sequence[Measurement], m: float) -> dict[str, float]:
    """A synthetic cross-validation: the best m is 2 when source D is among the rows, else 0.5;
    the error grows with |log m - log best| and differs by source so the folds are told apart."""
    best = 2.0 if any(r.source_id == "D" for r in rows) else 0.5
    offset = {"A": 0.01, "B": 0.02, "C": 0.03, "D": 0.05}
    return {r.row_id: offset[r.source_id] + 0.01 * abs(math.log(m / best)) for r in rows}


def test_nested_chooses_m_without_the_held_out_source_and_scores_it_with_that_m() -> None:
    rows = _rows("ABCD")
    res = nested(rows, GRID, _fake_loso)
    assert res["chosen_m"] == 2.0  # all sources include D
    assert res["folds"]["D"]["chosen_m"] == 0.5  # D held out: chosen on A, B, C
    assert all(res["folds"][s]["chosen_m"] == 2.0 for s in "ABC")
    # D's outer rows are scored with the fold's m (0.5), not the shipped one (2)
    assert res["folds"]["D"]["median_ape"] == pytest.approx(0.05 + 0.01 * math.log(4))
    assert res["folds"]["D"]["median_ape_at_shipped_m"] == pytest.approx(0.05)
    assert res["loso_at_chosen"]["median_ape"] == pytest.approx(0.025)
    assert res["nested"]["n"] == 12
    assert res["nested"]["median_ape"] == pytest.approx(0.025)
    assert res["nested"]["p90_ape"] > res["loso_at_chosen"]["p90_ape"]


def test_inner_scores_are_medians_per_grid_point() -> None:
    scores = inner_scores(_rows("ABC"), (0.5, 1.0), _fake_loso)
    assert scores == {0.5: pytest.approx(0.02), 1.0: pytest.approx(0.02 + 0.01 * math.log(2))}


@pytest.mark.slow
@pytest.mark.skipif(not data_path().exists(), reason="shared measurements not beside the checkout")
def test_shipped_fit_pair_is_the_rules_choice_on_the_shared_rows() -> None:
    """If this fails, the rows or the model changed: run ``python -m bench.fit_weighting`` and
    ship the pair it prints in planner/calibration/regularised.py (six leave-one-source-out
    runs, about 20 s)."""
    rows = usable(load()[0])
    m = choose(inner_scores(rows, GRID, loso_errors))
    assert shipped_pair(m) == (FIT_ROW_LOG_SD, FIT_SHARED_LOG_SD)
