"""REML estimate of the campaign noise (sigma_w, sigma_b) from held-out log residuals.

The rule the shipped noise model follows (``bench/results/noise.md``, written before its effect
was measured): the log residuals log(measured / predicted) of the *fitted* model on rows of a
source it was not fitted on (leave-one-source-out), campaigns (source x GPU type) as groups, the
one-way random-effects model

    e_gi = mu + b_g + w_gi,   b_g ~ N(0, sigma_b^2),   w_gi ~ N(0, sigma_w^2)

fitted by restricted maximum likelihood (REML: Patterson & Thompson 1971, Biometrika 58:545;
Searle, Casella & McCulloch, *Variance Components*, 1992, ch. 6), sigma_b >= 0. For a balanced
design with MSB >= MSW REML equals the ANOVA estimator (sigma_w^2 = MSW, sigma_b^2 =
(MSB - MSW) / n; Searle et al. §6.7); on unbalanced data (68 rows of one campaign, 10 of
another) it weighs the campaigns as the likelihood says instead of by n0. Why held-out residuals
of the fitted model rather than those of the priors: the fit's weights, the cluster level's
shrinkage and the prediction band all need the error of the model as it predicts a campaign it
has not seen, after it has learnt what the other campaigns teach.

Each component gets a 95 % profile-likelihood interval (the restricted log-likelihood maximised
over the other component, cut 1.92 = chi2_1(0.95) / 2 below its maximum; Pawitan, *In All
Likelihood*, 2001, §2.6). With four campaigns sigma_b rests on three degrees of freedom: its
interval is wide and usually reaches 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from planner.calibration.noise import NoiseModel, campaign_index
from planner.layouts import FloatArray

PROFILE_CUT = 1.920729
"""chi2_1(0.95) / 2: a 95 % profile-likelihood interval (Pawitan 2001, §2.6)."""
_LOG_SD_RANGE = (math.log(1e-5), math.log(10.0))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Groups:
    """Per-campaign sufficient statistics of the residuals: rows, mean, within sum of squares."""

    n: FloatArray
    mean: FloatArray
    ssw: float

    @staticmethod
    def of(residuals: FloatArray, campaigns: Sequence[str]) -> _Groups:
        r = np.asarray(residuals, dtype=np.float64)
        if len(r) != len(campaigns):
            raise ValueError("residuals and campaigns must have one entry per row")
        g = campaign_index(list(campaigns))
        n = np.bincount(g).astype(np.float64)
        mean = np.bincount(g, weights=r) / n
        return _Groups(n=n, mean=mean, ssw=float(np.sum((r - mean[g]) ** 2)))


def gls_mean(n: FloatArray, mean: FloatArray, sw2: float, sb2: float) -> tuple[float, float]:
    """(mu_hat, Var(mu_hat)): the generalised-least-squares mean of campaign means ``mean`` of
    ``n`` rows each, campaign g weighted by n_g / (sw2 + n_g sb2) (Searle et al. 1992, §3.6)."""
    w = n / (sw2 + n * sb2)
    return float(np.sum(w * mean) / np.sum(w)), float(1.0 / np.sum(w))


def _restricted_loglik(s: _Groups, sw2: float, sb2: float) -> float:
    """REML log-likelihood of the one-way model, constants dropped (Searle et al. §6.6): per
    campaign log|V_g| = (n_g - 1) log sw2 + log(sw2 + n_g sb2), the quadratic form
    SSW_g / sw2 + n_g (mean_g - mu)^2 / (sw2 + n_g sb2), plus log(1' V^-1 1) for mu."""
    lam = sw2 + s.n * sb2
    mu, var_mu = gls_mean(s.n, s.mean, sw2, sb2)
    log_det = float(np.sum((s.n - 1) * math.log(sw2) + np.log(lam)))
    quad = s.ssw / sw2 + float(np.sum(s.n * (s.mean - mu) ** 2 / lam))
    return -0.5 * (log_det - math.log(var_mu) + quad)


def _maximise(f: Callable[[float], float], lo: float, hi: float) -> tuple[float, float]:
    """(argmax, max) of a smooth 1-D function on [lo, hi], the end points included."""
    res = minimize_scalar(
        lambda x: -f(x), bounds=(lo, hi), method="bounded", options={"xatol": 1e-9}
    )
    best = (float(res.x), -float(res.fun))
    for edge in (lo, hi):
        value = f(edge)
        if value > best[1]:
            best = (edge, value)
    return best


@dataclass(frozen=True, slots=True, kw_only=True)
class VarianceComponents:
    """The REML estimate of the campaign noise with its uncertainty."""

    within_log_sd: float
    """sigma_w: a row's own log error around its campaign's shift."""
    shared_log_sd: float
    """sigma_b: the spread of a campaign's shift (>= 0; 0 at the boundary)."""
    within_ci: tuple[float, float]
    """95 % profile-likelihood interval of sigma_w."""
    shared_ci: tuple[float, float]
    """95 % profile-likelihood interval of sigma_b (its lower end is often 0)."""
    mean_log: float
    """mu: the GLS mean of the log residuals (the model's mean held-out log(measured / pred))."""
    mean_log_sd: float
    """sd of mu given the components."""
    rows: int
    campaigns: int
    restricted_loglik: float

    @property
    def noise(self) -> NoiseModel:
        return NoiseModel(within_log_sd=self.within_log_sd, shared_log_sd=self.shared_log_sd)

    def to_dict(self) -> dict[str, object]:
        return {
            "within_log_sd": self.within_log_sd,
            "shared_log_sd": self.shared_log_sd,
            "within_ci": list(self.within_ci),
            "shared_ci": list(self.shared_ci),
            "rho": self.noise.rho,
            "mean_log": self.mean_log,
            "mean_log_sd": self.mean_log_sd,
            "rows": self.rows,
            "campaigns": self.campaigns,
            "restricted_loglik": self.restricted_loglik,
        }


def reml(
    residuals: FloatArray, campaigns: Sequence[str], *, intervals: bool = True
) -> VarianceComponents:
    """sigma_w and sigma_b of log ``residuals`` grouped by ``campaigns`` (REML, sigma_b >= 0);
    ``intervals=False`` skips the profile-likelihood intervals (NaN), most of the cost."""
    s = _Groups.of(residuals, campaigns)
    rows, k = int(np.sum(s.n)), len(s.n)
    if rows - k < 1 or k < 2:
        raise ValueError(
            f"{rows} rows in {k} campaigns: REML needs at least two campaigns and more rows than "
            "campaigns to separate the within- and between-campaign noise"
        )
    total = float(np.std(np.repeat(s.mean, s.n.astype(np.intp)), ddof=0)) + math.sqrt(s.ssw / rows)
    sb_hi = 10.0 * max(total, 1e-4)

    def best_sw(sb: float) -> tuple[float, float]:
        x, ll = _maximise(lambda t: _restricted_loglik(s, math.exp(2 * t), sb * sb), *_LOG_SD_RANGE)
        return math.exp(x), ll

    def best_sb(sw: float) -> tuple[float, float]:
        return _maximise(lambda b: _restricted_loglik(s, sw * sw, b * b), 0.0, sb_hi)

    sb, ll_max = _maximise(lambda b: best_sw(b)[1], 0.0, sb_hi)
    sw = best_sw(sb)[0]
    cut = ll_max - PROFILE_CUT
    shared_ci, log_ci = (math.nan, math.nan), (math.nan, math.nan)
    if intervals:
        shared_ci = _interval(lambda b: best_sw(b)[1] - cut, sb, 0.0, sb_hi)
        log_ci = _interval(lambda t: best_sb(math.exp(t))[1] - cut, math.log(sw), *_LOG_SD_RANGE)
    mu, var_mu = gls_mean(s.n, s.mean, sw * sw, sb * sb)
    return VarianceComponents(
        within_log_sd=sw,
        shared_log_sd=sb,
        within_ci=(math.exp(log_ci[0]), math.exp(log_ci[1])),
        shared_ci=shared_ci,
        mean_log=mu,
        mean_log_sd=math.sqrt(var_mu),
        rows=rows,
        campaigns=k,
        restricted_loglik=ll_max,
    )


def _interval(
    above_cut: Callable[[float], float], at: float, lo: float, hi: float
) -> tuple[float, float]:
    """Where ``above_cut`` (>= 0 at the estimate ``at``) crosses 0 on each side, within
    [lo, hi]; an end that never drops below the cut is the range's end."""
    ends = []
    for edge in (lo, hi):
        if edge == at or above_cut(edge) >= 0:
            ends.append(edge)
        else:
            ends.append(float(brentq(above_cut, edge, at, xtol=1e-9)))
    return ends[0], ends[1]
