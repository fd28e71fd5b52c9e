"""The keep decision's figures and the page's before / after figures are one number.

The decision was worded from the raw held-out error while the page printed the stored value
(rounded to 4 decimals): 0.00449999 read '0.4 %' on the page and '0.5 %' in the decision text.
"""

from __future__ import annotations

from app.calibration.fit import _percent
from app.calibration.honest import fit_decision, num
from planner.calibration.fit import ErrorStats
from planner.calibration.honest_cv import HonestCV


def _stats(median: float) -> ErrorStats:
    return ErrorStats(n=5, median_ape=median, p90_ape=median)


def test_decision_text_prints_the_stored_figure() -> None:
    raw = 0.0045000001  # stored as 0.0045, whose percent prints as 0.4
    cv = HonestCV(
        method="by row", folds=5, before=_stats(0.007), after=_stats(raw), level_only=_stats(0.006)
    )
    reason = fit_decision(cv)["reason"]
    shown = _percent({"median_ape": num(raw)})["median"]
    assert f"the level and the coefficient fit {shown}" in reason
