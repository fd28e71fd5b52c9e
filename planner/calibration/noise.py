"""Row noise with a shared per-campaign component: rows of one campaign share their errors.

A *campaign* is one source measuring on one GPU type (``campaign_key``): one cluster, one
software stack, one way of reading throughput. Its rows' log errors are modelled as

    e_gi = b_g + w_gi,   b_g ~ N(0, shared_log_sd^2),   w_gi ~ N(0, within_log_sd^2)

a one-way random-effects model (Searle, Casella & McCulloch, *Variance Components*, 1992,
ch. 3) with intra-campaign correlation rho = sigma_b^2 / (sigma_b^2 + sigma_w^2). The fit weighs
each row of a campaign of n rows by 1 / (1 + (n - 1) rho), Kish's design effect (*Survey
Sampling*, 1965, ch. 5: deff = 1 + roh (b - 1)): for a shift common to the campaign's rows that
gives the information n / (sigma_w^2 + n sigma_b^2) of generalised least squares with the block
covariance sigma_w^2 I + sigma_b^2 J, which tends to 1 / sigma_b^2 however many rows a campaign
has, so 68 rows of one benchmark suite count as ``effective_rows(68)`` (about 4 with the fit's
weighting ``FIT_NOISE``) independent rows, not 68.

The weight applies to every direction, not only to the common shift (where GLS would give
within-campaign contrasts, bf16 vs fp8 or 8 vs 64 nodes, their full n / sigma_w^2): a campaign is
one software stack, whose own attention kernel, overlap settings and clocks shift its contrasts
too (a coefficient-level campaign effect, Scott & Holt, JASA 77:848, 1982, on the design effect of
regression slopes). Measured on the shared rows: fitted on one campaign (11 NeMo rows), the
intercept-only GLS still moved the attention efficiency by 22 % and doubled the held-out error of
the other H100 campaign (1.8 % -> 4.8 % median); the design effect kept it (2.0 %).

A user's upload from one cluster is one campaign (its rows share a source_id and a GPU type):
five rows count as ``effective_rows(5)`` (2.5 with the fit's weighting ``FIT_NOISE``, rho 0.25;
the prediction noise ``NOISE`` has rho 0.21, planner.calibration.regularised), so a small upload
pulls the coefficients less than five independent rows would. The rows' shared error is partly the
cluster's own level, which the user's later runs share too; but it is also what the model gets
wrong for that stack and those layouts, and fitting it fully moved coefficients that then
predicted the same campaign's other rows worse: five random rows of one campaign (12 draws,
architecture priors as the prior), the campaign's other rows: dgxc 1.8 % median (priors) ->
2.8 % fitted as independent rows, 2.1 % with the design effect; NeMo 3.8 -> 3.7 / 2.9 %;
Korthikanti 10.9 -> 6.3 / 6.4 %.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.calibration.measurements import Measurement
from planner.layouts import FloatArray


def campaign_key(m: Measurement) -> str:
    """The campaign a row belongs to: its source on its GPU type."""
    return f"{m.source_id}|{m.cluster.gpu.name}"


def campaign_index(keys: Sequence[str]) -> np.ndarray:
    """Integer group label per row (0..G-1, in order of first appearance)."""
    seen: dict[str, int] = {}
    return np.array([seen.setdefault(k, len(seen)) for k in keys], dtype=np.intp)


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseModel:
    """Log-error standard deviations of a row: within its campaign and shared by the campaign."""

    within_log_sd: float
    """sigma_w: a row's own error around its campaign's shift."""
    shared_log_sd: float
    """sigma_b: the campaign's common shift (cluster, stack, how throughput was read)."""

    def __post_init__(self) -> None:
        if not self.within_log_sd > 0:
            raise ValueError(f"within_log_sd={self.within_log_sd} must be > 0")
        if not self.shared_log_sd >= 0:
            raise ValueError(f"shared_log_sd={self.shared_log_sd} must be >= 0")

    @property
    def total_log_sd(self) -> float:
        return math.hypot(self.within_log_sd, self.shared_log_sd)

    @property
    def rho(self) -> float:
        """Intra-campaign correlation sigma_b^2 / (sigma_b^2 + sigma_w^2)."""
        return self.shared_log_sd**2 / self.total_log_sd**2

    def effective_rows(self, n: int) -> float:
        """Independent rows (of the total noise) that n rows of one campaign are worth for a
        shift they share: n / (1 + (n - 1) rho) (Kish's design effect)."""
        return n / (1.0 + (n - 1) * self.rho) if n > 0 else 0.0

    def weights(self, groups: np.ndarray) -> FloatArray:
        """Each row's weight in the fit's data term: 1 / (sigma^2 (1 + (n_g - 1) rho)), n_g the
        rows of its campaign, sigma^2 = sigma_w^2 + sigma_b^2 (Kish's design effect)."""
        g = np.asarray(groups, dtype=np.intp)
        if len(g) == 0:
            return np.empty(0)
        n = np.bincount(g)[g]
        w: FloatArray = np.asarray(
            1.0 / (self.total_log_sd**2 * (1.0 + (n - 1) * self.rho)), dtype=np.float64
        )
        return w

    def whiten(self, values: FloatArray, groups: np.ndarray) -> FloatArray:
        """``values`` (rows first: 1-D residuals or a 2-D Jacobian) times sqrt(weight), so that
        a sum of squares of the result is the fit's weighted data term."""
        x = np.asarray(values, dtype=np.float64)
        root = np.sqrt(self.weights(groups)).reshape((-1,) + (1,) * (x.ndim - 1))
        white: FloatArray = x * root
        return white
