"""How far a campaign the fit never saw sits from the band's centre: the between-campaign spread
of a prediction band for a new cluster or stack (issue 12 item 9).

Why this module. The table's bands (:mod:`planner.calibration.interval_bands`) take the
between-campaign sd sigma_b from REML on the shared rows' four campaigns (0.025, three degrees
of freedom). Those four (dgxc and NeMo on H100, Korthikanti and Narayanan on A100) are the
campaigns the model's structure and priors were built around, so their held-out offsets
understate what a user's new cluster, stack or model family does: on published runs never fitted
the band held 6 of 22 figures from new campaigns (``bench/results/published_check.md``).

The rule (candidate (a) of the brief, chosen over the others for these reasons):

* A new campaign's offset b from the band's centre is a draw from the population of campaigns,
  b ~ N(0, tau^2). Every campaign whose predictions were never fitted on it is a draw: the
  shared rows' four (their leave-one-source-out residuals) and each published campaign of
  ``bench.published_check`` that no row of the fit comes from (a source on one GPU type, its
  point predictions never fitted). tau is estimated from all of them; nothing else (no centre,
  no sigma_w, no coefficient, no point prediction) learns from the published runs.
* Estimator: maximum likelihood of tau with the mean fixed at 0 and sigma_w fixed at the shared
  rows' estimate (97 within-campaign degrees of freedom): campaign g's mean deviation
  m_g ~ N(0, tau^2 + sigma_w^2 / n_g) (the one-way random-effects model with known mean and
  within variance, Searle, Casella & McCulloch 1992, §3.5). The mean is fixed because the band's
  centre is fixed by the shared rows: a systematic shift of new campaigns (they run slower than
  predicted) is then part of tau, which is what coverage around that centre needs.
* Why not (b), widening by extrapolation flags: the largest new-campaign miss (the Megatron-LM
  README runs, 11 figures 8-16 % slow) carries no flag, and each flag has one or two published
  campaigns, too few to learn a factor per flag. Why not (c), a stated prior on sigma_b combined
  with the four campaigns' likelihood: the scale would be a choice nobody can check, and four
  homogeneous campaigns would still pull the posterior down to where it failed.
* Degrees of freedom: Student's t on G - 1, G the campaigns of the estimate (the centre is a mean
  of some of the same campaigns), as the shared-row bands use campaigns - 1.
* Out of sample: the published coverage is measured leaving each published campaign out of tau
  (``bench.published_bands``), the shared-row coverage leaving each source out of the centre,
  sigma_w and tau (``bench.calibration``); :func:`estimate` takes the campaign to leave out.

A calibrated cluster (uploaded runs, :mod:`planner.calibration.level`) knows its own offset
better: :func:`calibrated_offset_sd` is the error of its shrunken level under the new-campaign
prior tau, which replaces tau in the band.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scipy.optimize import minimize_scalar
from scipy.special import stdtrit  # Student's t quantile (scipy.stats costs ~0.6 s to import)


@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignOffset:
    """One campaign's rows' mean log(measured / predicted) minus their bands' centres."""

    campaign: str
    """Source on one GPU type (``noise.campaign_key`` for shared rows)."""
    rows: int
    mean_log_deviation: float
    kind: str = "shared"
    """'shared' (leave-one-source-out residuals of the shared rows) or 'published' (a published
    campaign never fitted, ``bench.published_check``)."""

    def __post_init__(self) -> None:
        if self.rows < 1:
            raise ValueError(f"campaign {self.campaign!r}: rows={self.rows} must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "rows": self.rows,
            "mean_log_deviation": self.mean_log_deviation,
            "kind": self.kind,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferSpread:
    """The between-campaign sd a band for a new campaign uses, and what it rests on."""

    log_sd: float
    """tau: sd of a new campaign's offset from the band's centre."""
    df: int
    """Degrees of freedom of the t quantile: campaigns of the estimate - 1."""
    within_log_sd: float
    """sigma_w the estimate held fixed (the shared rows' prediction noise)."""
    campaigns: tuple[CampaignOffset, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.log_sd >= 0:
            raise ValueError(f"log_sd={self.log_sd} must be >= 0")
        if self.df < 1:
            raise ValueError(f"df={self.df} must be >= 1: the estimate needs two campaigns")

    @property
    def published_campaigns(self) -> int:
        return sum(c.kind == "published" for c in self.campaigns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "log_sd": self.log_sd,
            "df": self.df,
            "within_log_sd": self.within_log_sd,
            "campaigns": [c.to_dict() for c in self.campaigns],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransferSpread:
        return cls(
            log_sd=float(data["log_sd"]),
            df=int(data["df"]),
            within_log_sd=float(data["within_log_sd"]),
            campaigns=tuple(CampaignOffset(**c) for c in data.get("campaigns", [])),
        )


def transfer_log_sd(offsets: Sequence[CampaignOffset], within_log_sd: float) -> float:
    """ML tau of m_g ~ N(0, tau^2 + sigma_w^2 / n_g), tau >= 0 (module docstring)."""
    if not offsets:
        raise ValueError("no campaign offsets: tau needs at least two campaigns")
    sw2 = within_log_sd**2

    def neg_loglik(tau: float) -> float:
        # Searle et al. 1992 §3.5: a campaign mean's variance is tau^2 + sigma_w^2 / n_g
        total = 0.0
        for c in offsets:
            v = tau * tau + sw2 / c.rows
            total += math.log(v) + c.mean_log_deviation**2 / v
        return 0.5 * total

    hi = 10.0 * max(max(abs(c.mean_log_deviation) for c in offsets), within_log_sd)
    res = minimize_scalar(neg_loglik, bounds=(0.0, hi), method="bounded", options={"xatol": 1e-9})
    best = float(res.x)
    return 0.0 if neg_loglik(0.0) <= neg_loglik(best) else best


def estimate(
    offsets: Iterable[CampaignOffset], within_log_sd: float, *, leave_out: str | None = None
) -> TransferSpread:
    """tau from every campaign but ``leave_out`` (nested: a held-out campaign never informs its
    own band), with df = campaigns - 1."""
    kept = tuple(c for c in offsets if c.campaign != leave_out)
    if len(kept) < 2:
        raise ValueError(f"{len(kept)} campaign(s) left: tau needs at least two")
    return TransferSpread(
        log_sd=transfer_log_sd(kept, within_log_sd),
        df=len(kept) - 1,
        within_log_sd=within_log_sd,
        campaigns=kept,
    )


def new_campaign_band(
    log_centre: float,
    centre_log_sd: float,
    spread: TransferSpread,
    *,
    low_q: float,
    high_q: float,
    within_log_sd: float | None = None,
    offset_log_sd: float | None = None,
) -> tuple[float, float, float]:
    """(low, high, sd) of measured / predicted for one row of a campaign the fit never saw:
    exp(centre + t_q(df) sqrt(sigma_w^2 + tau^2 + Var(centre))) (Searle et al. 1992, §3.6, the
    prediction interval of a new group's observation). ``within_log_sd``: the band's own sigma_w
    where it has one (the transferred-GPU band's), else the spread's; ``offset_log_sd`` replaces
    tau where the cluster's own offset is known better (a calibrated cluster,
    :func:`calibrated_offset_sd`)."""
    offset = spread.log_sd if offset_log_sd is None else offset_log_sd
    within = spread.within_log_sd if within_log_sd is None else within_log_sd
    sd = math.sqrt(within**2 + offset**2 + centre_log_sd**2)
    lo_t, hi_t = float(stdtrit(spread.df, low_q)), float(stdtrit(spread.df, high_q))
    return math.exp(log_centre + lo_t * sd), math.exp(log_centre + hi_t * sd), sd


def calibrated_offset_sd(level: dict[str, Any] | None, tau: float) -> float | None:
    """Root mean squared error of a calibrated cluster's fitted level as its offset, when new
    campaigns' offsets spread with sd ``tau`` (None: no level, the band keeps tau).

    The level (:func:`planner.calibration.level.level_posterior`) shrinks the rows' location by
    k toward 0 with its own prior; for an offset b ~ N(0, tau^2) the shrunken estimate misses by
    (1 - k) b - k e, e the location's error (sd sigma_w / sqrt(n)), so its mean squared error is
    (1 - k)^2 tau^2 + k^2 sigma_w^2 / n (BDA §5.4; the bias term is what a prior narrower than
    tau costs). ``level``: a profile's ``provenance["cluster_level"]``."""
    if not level:
        return None
    n = int(level.get("n_rows", 0))
    if n < 1:
        return None
    k, sw = float(level["shrinkage"]), float(level["within_log_sd"])
    return math.sqrt((1 - k) ** 2 * tau**2 + k**2 * sw**2 / n)
