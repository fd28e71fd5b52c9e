"""The plan's uncertainty as the band counts it: the coefficients' part and the cluster's level.

:func:`planner.calibration.suggest.suggest_runs` ranks runs by how much they sharpen the
profile's coefficients (g' P g). A cluster the user never calibrated is also off by its own
shift b ~ N(0, tau^2) (tau: the interval table's transfer block, what the band of a campaign the
fit never saw uses, :mod:`planner.calibration.campaign_spread`). A calibration fits that shift as
the cluster's level (:mod:`planner.calibration.level`): one level for all rows of one
calibration, whatever their layout, so every run on the user's cluster informs it alike, and the
level's error after n rows is what the band puts in tau's place,
(1 - k)^2 tau^2 + k^2 sigma_w^2 / n (``campaign_spread.calibrated_offset_sd``; k the level's
shrinkage). The plan's uncertainty before and after the runs is the root sum of squares of the
two parts (independent: the level is fitted on the rows' common shift, the coefficients on
their contrasts, ``level.with_level``).

Rows before the runs: the rows already measured on the cluster (they would be in the next
calibration), or the profile's own calibrated level where it counts more; a profile calibrated
on exactly those rows keeps its stored level's shrinkage, so "before" is the band the plan shows
now. After: those rows and the K runs, levelled with the current prior (a re-calibration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.calibration.campaign_spread import calibrated_offset_sd
from planner.calibration.level import level_posterior
from planner.calibration.noise import NoiseModel


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanUncertainty:
    """The plan's prediction error (log tokens/s), split into what the runs can reduce."""

    coefficient_log_sd: float
    """sqrt(g' P g): from the profile's coefficients (:mod:`planner.calibration.suggest`)."""
    level_log_sd: float
    """From the cluster's offset: tau uncalibrated, the level's error after ``level_rows``."""
    level_rows: int
    """Rows of this cluster its level is (or would be) fitted on."""

    @property
    def log_sd(self) -> float:
        """Both parts together (independent, so their variances add)."""
        return math.hypot(self.coefficient_log_sd, self.level_log_sd)

    @property
    def variance(self) -> float:
        return self.log_sd**2

    def to_dict(self) -> dict[str, Any]:
        def pct(sd: float) -> float:
            return round(100 * float(np.expm1(sd)), 2)

        return {
            "total_pct": pct(self.log_sd),
            "coefficients_pct": pct(self.coefficient_log_sd),
            "cluster_level_pct": pct(self.level_log_sd),
            "cluster_level_rows": self.level_rows,
        }


def level_log_sd(rows: int, noise: NoiseModel, level: dict[str, Any] | None = None) -> float:
    """The cluster level's error after ``rows`` rows of the cluster, as the band counts it.

    ``noise``: the level's noise model (``level.new_cluster_noise`` of the interval table:
    sigma_b = tau). ``level``: a stored level (``provenance["cluster_level"]``) to use instead
    of one fitted now (its shrinkage may come from another prior). No row: tau; the band keeps
    tau where the level would be no better (``intervals``: calibrated only below tau)."""
    tau = noise.shared_log_sd
    if level is None:
        if rows < 1:
            return tau
        fitted = level_posterior(np.zeros(rows), noise)
        level = {
            "n_rows": rows,
            "shrinkage": fitted.shrinkage,
            "within_log_sd": fitted.within_log_sd,
        }
    offset = calibrated_offset_sd(level, tau)
    return tau if offset is None else min(offset, tau)


def level_before(
    rows_measured: int, noise: NoiseModel, stored: dict[str, Any] | None
) -> tuple[int, float]:
    """(rows, level sd) before the runs: the measured rows, or the profile's stored level where
    it was fitted on as many or more (the band the plan shows now)."""
    stored_rows = int(stored.get("n_rows", 0)) if stored else 0
    if stored and stored_rows >= max(rows_measured, 1):
        return stored_rows, level_log_sd(stored_rows, noise, stored)
    return rows_measured, level_log_sd(rows_measured, noise)


def run_shares(
    coefficient_gains: list[float],
    level: tuple[int, float],
    noise: NoiseModel,
    total_before: float,
) -> list[float]:
    """Each run's share of the plan's variance before the runs: its coefficient gain plus what
    it takes off the level's (``level``: rows and sd before, :func:`level_before`; the i-th run
    takes the level to rows + i rows)."""
    rows, sd = level
    shares = []
    for i, gain in enumerate(coefficient_gains, start=1):
        after = level_log_sd(rows + i, noise)
        shares.append((gain + max(sd**2 - after**2, 0.0)) / max(total_before, 1e-30))
        sd = after
    return shares
