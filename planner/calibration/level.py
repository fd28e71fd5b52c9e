"""The cluster's level: the offset all rows of one cluster share, fitted before any coefficient.

The noise model (:mod:`planner.calibration.noise`) says what a user's cluster is: its rows'
log errors are ``e_i = b + w_i`` with a shared offset ``b ~ N(0, sigma_b^2)`` (clocks and power
caps, thermals, host jitter, fabric congestion: what the mechanisms do not describe) and
independent ``w_i ~ N(0, sigma_w^2)``. Five rows of one cluster identify ``b`` far better than
any single mechanism coefficient, so a user calibration estimates it first, as its posterior
mean given r, the Huber location of the rows' log residuals (the normal-normal model: Gelman
et al., *Bayesian Data Analysis*, 3rd ed., 2013, §5.4, the conditional posterior of one group's
mean):

    E[b | r] = k r,   k = n sigma_b^2 / (n sigma_b^2 + sigma_w^2)
    Var[b | r] = sigma_b^2 sigma_w^2 / (n sigma_b^2 + sigma_w^2)

and stores it as the profile's ``cluster_step_scale`` (step time x exp(-E[b]): rows that run
10 % slower than predicted make the step longer). The coefficient fit then runs on what is left:
the rows' contrasts, their common shift being the level's (``Prepared.centred``), so a cluster
uniformly slower moves the level and no coefficient, and a coefficient every row depends on
alike (a GEMM plateau on compute-bound rows) is not identified apart from the level.
The constants (:func:`new_cluster_noise`): sigma_b is the between-campaign sd of campaigns the
fit never saw, tau of the interval table's transfer block (:mod:`.campaign_spread`: ML on the
shared rows' four campaigns and the published campaigns never fitted), the same number the
prediction band of an uncalibrated cluster uses, so the level's prior and the band agree on how
far a new cluster sits from the prediction; the REML sigma_b of the four shared campaigns
(``regularised.NOISE_SHARED_LOG_SD``, 0.025) understates it (campaigns the fit never saw shift by
~0.1 in log) and is only the fallback of a table without a transfer block. sigma_w is the
prediction noise's (``regularised.NOISE_LOG_SD``: REML on held-out residuals,
``bench/results/noise.md``). Neither is the fit weighting (``regularised.FIT_NOISE``): that is
the ridge's strength, a hyperparameter chosen by cross-validation of the coefficient fit, not a
statement about a cluster's offset, and the level leaves it alone. Nothing is tuned per campaign.
The rows of one calibration are taken as one cluster.

A prediction's tokens/s is ``global batch x sequence / (step x GPUs)``, so the level divides every
prediction by the scale exactly and leaves d log(prediction) / d coefficient unchanged: the
Jacobian at the prior (:mod:`planner.calibration.regularised`) serves the levelled prior too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from planner.calibration.campaign_spread import TransferSpread
from planner.calibration.identify import Coordinates
from planner.calibration.noise import NoiseModel
from planner.calibration.regularised import NOISE_LOG_SD, NOISE_SHARED_LOG_SD, Prepared
from planner.layouts import FloatArray


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterLevel:
    """The posterior of the cluster's shared offset in log tokens/s (measured / predicted)."""

    n_rows: int
    mean_log_residual: float
    """The rows' mean log(measured / predicted) under the prior profile (reported)."""
    location_log_residual: float
    """r: the rows' Huber location of the same (:func:`huber_location`), what the level uses."""
    shrinkage: float
    """k = n sigma_b^2 / (n sigma_b^2 + sigma_w^2): the share of r credited to the cluster."""
    log_mean: float
    """E[b | rows] = k r."""
    log_sd: float
    """sd[b | rows]: what is left of the between-cluster spread sigma_b after the rows."""
    prior_log_sd: float
    """sigma_b: the spread of b before any row (one cluster against another; tau of the band's
    transfer spread, :func:`new_cluster_noise`)."""
    within_log_sd: float
    """sigma_w: a row's own error around the cluster's offset."""

    @property
    def step_scale(self) -> float:
        """Multiplier on the step time (> 1: the cluster runs slower than the mechanisms say)."""
        return math.exp(-self.log_mean)

    @property
    def throughput_factor(self) -> float:
        """Measured / predicted tokens/s the level credits to the cluster (1 / step_scale)."""
        return math.exp(self.log_mean)

    def to_dict(self) -> dict[str, float | int]:
        return {
            "cluster_step_scale": round(self.step_scale, 5),
            "throughput_factor": round(self.throughput_factor, 5),
            "log_mean": round(self.log_mean, 5),
            "log_sd": round(self.log_sd, 5),
            "prior_log_sd": round(self.prior_log_sd, 5),
            "within_log_sd": round(self.within_log_sd, 5),
            "n_rows": self.n_rows,
            "shrinkage": round(self.shrinkage, 4),
            "mean_log_residual": round(self.mean_log_residual, 5),
            "location_log_residual": round(self.location_log_residual, 5),
        }


HUBER_C = 1.345
"""Huber's tuning constant: 95 % of the mean's efficiency when the errors are normal (Huber,
*Robust Statistics*, 1981, §4.6; Huber & Ronchetti 2009)."""


def huber_location(r: FloatArray, scale: float, c: float = HUBER_C) -> float:
    """Huber's M-estimate of location with a known scale (the noise model's sigma_w).

    Why not the mean: the priors' residuals are heavier-tailed than normal (|error| p90 / median
    = 13.8 / 3.9 = 3.5 on the shared rows' priors; 2.4 for a normal), so one far-off row of five
    would drag a mean, and with it every other row's prediction. Rows within c sigma_w of the
    location count fully, those beyond with weight c sigma_w / |distance| (iteratively
    reweighted mean, started at the median)."""
    x = np.asarray(r, dtype=np.float64)
    mu = float(np.median(x))
    for _ in range(100):
        dist = np.abs(x - mu)
        w = np.minimum(1.0, c * scale / np.maximum(dist, 1e-12))
        new = float(np.sum(w * x) / np.sum(w))
        if abs(new - mu) < 1e-10:
            return new
        mu = new
    return mu


def new_cluster_noise(spread: TransferSpread | None) -> NoiseModel:
    """The noise model of a new cluster's level: sigma_b the prior sd of its offset, tau of the
    interval table's transfer block (``IntervalTable.transfer``, what the band of a campaign the
    fit never saw uses; module docstring), ``NOISE_SHARED_LOG_SD`` where the table has none;
    sigma_w the prediction noise's."""
    shared = NOISE_SHARED_LOG_SD if spread is None else spread.log_sd
    return NoiseModel(within_log_sd=NOISE_LOG_SD, shared_log_sd=shared)


def level_posterior(log_residuals: FloatArray, noise: NoiseModel) -> ClusterLevel:
    """The posterior of the shared offset b from the rows' log(measured / predicted)."""
    r = np.asarray(log_residuals, dtype=np.float64)
    n = len(r)
    sb2, sw2 = noise.shared_log_sd**2, noise.within_log_sd**2
    mean = float(r.mean()) if n else 0.0
    location = huber_location(r, noise.within_log_sd) if n else 0.0
    # BDA §5.4, one group: the precision-weighted mean of the prior (0) and the rows' location
    shrinkage = n * sb2 / (n * sb2 + sw2)
    return ClusterLevel(
        n_rows=n,
        mean_log_residual=mean,
        location_log_residual=location,
        shrinkage=shrinkage,
        log_mean=shrinkage * location,
        log_sd=math.sqrt(sb2 * sw2 / (n * sb2 + sw2)),
        prior_log_sd=noise.shared_log_sd,
        within_log_sd=noise.within_log_sd,
    )


def prepared_level(
    prepared: Prepared,
    subset: FloatArray | list[int] | None = None,
    *,
    noise: NoiseModel,
) -> ClusterLevel:
    """The level from ``prepared``'s rows (or a cross-validation fold's ``subset`` of them).
    ``noise``: :func:`new_cluster_noise` of the interval table's transfer spread (required, so
    that no caller falls back to another sigma_b unnoticed)."""
    idx = np.arange(len(prepared.rows)) if subset is None else np.asarray(subset, dtype=np.intp)
    resid = np.log(prepared.measured[idx] / np.maximum(prepared.base_pred[idx], 1e-12))
    # the new-cluster prior, not the fit's weighting (prepared.noise_model): the level is a
    # statement about how far this cluster sits from the prediction
    return level_posterior(resid, noise)


def with_level(prepared: Prepared, level: ClusterLevel) -> Prepared:
    """``prepared`` with the level applied to its prior: predictions / scale, the same Jacobian
    (the level is a constant in log space), the prior profile carrying the composed scale."""
    prior = prepared.coords.prior
    levelled = prior.with_coefficients(
        cluster_step_scale=prior.cluster_step_scale * level.step_scale
    )
    return replace(
        prepared,
        coords=Coordinates(levelled, prepared.coords.names),
        base_pred=prepared.base_pred / level.step_scale,
        centred=True,
    )
