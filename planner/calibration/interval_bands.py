"""Building the prediction bands of :mod:`planner.calibration.intervals` from held-out residuals.

A band is the 80 % (10 % each side) band of measured / predicted tokens/s for one new row of a
campaign the model has not seen, per regime (and every parent of it), from the held-out
(leave-one-source-out) ratios of the regime's rows. Its rows are not independent: rows of one
campaign (a source on one GPU type) share an error component (:mod:`planner.calibration.noise`),
so a regime whose rows come from one benchmark suite measures that suite's errors, not those of
a new cluster. A band therefore records the *effective* rows of its members, each campaign
counted by the design effect, and the table lets a regime use its own band only with at least
``min_rows`` effective rows (else its parent's).

The shipped band (``rule="model"``, :func:`model_band`) is the noise model's predictive
interval, a rule fixed before it was measured (``bench/results/noise.md``): centre mu_r, the
generalised-least-squares mean of the regime's held-out log ratios under the campaign noise
model; predictive sd s = sqrt(sigma_w^2 + sigma_b^2 + Var(mu_r)) (the coefficients' own
estimation error is inside the held-out residuals sigma_w and sigma_b were estimated from);
band exp(mu_r + t_q s) with t_q Student's t quantile at ``low_q`` / ``high_q`` on ``df``
degrees of freedom, the between-campaign degrees of freedom of the noise estimate (campaigns
- 1), which dominate the uncertainty of the scale (the prediction interval of a new group's
observation in the one-way random-effects model, Searle, Casella & McCulloch 1992, §3.6).
Why not distribution-free: conformal coverage is exact for exchangeable units, and the units a
new cluster is exchangeable with are campaigns, of which the shared rows have four (with k
campaigns an 80 % conformal band for a new campaign's shift is unbounded unless
ceil((k+1) 0.9) <= k, i.e. k >= 9); a split-conformal band over rows counts the rows of one
campaign as independent. The model band instead assumes normal log errors, which is what the
fit's weights already assume.

The band a plan response shows widens this one for a campaign the fit never saw: sigma_b is
replaced by the between-campaign sd of the shared and the published never-fitted campaigns
(:mod:`planner.calibration.campaign_spread`); the table keeps this band, and each band records
its sigma_w and sqrt(Var(mu_r)) so the response can rebuild it with the other spread.

The earlier split-conformal bands (``rule="conformal-effective"``: ranks with n the effective
rows, Francisco & Fuller 1991 for the design effect of a sample quantile; ``"conformal-rows"``:
n every row) are kept for the bench's before/after.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from scipy.special import stdtrit  # Student's t quantile (scipy.stats costs ~0.6 s to import)

from planner.calibration.intervals import fallback_keys
from planner.calibration.noise import NoiseModel, campaign_index
from planner.calibration.variance_components import gls_mean
from planner.layouts import FloatArray

BandRule = Literal["model", "conformal-effective", "conformal-rows"]


def model_band(
    ratios: Sequence[float] | FloatArray,
    campaigns: Sequence[str],
    noise: NoiseModel,
    *,
    df: int,
    low_q: float,
    high_q: float,
) -> dict[str, Any]:
    """The noise model's ``low_q``-``high_q`` predictive band of measured / predicted for one
    new row of a new campaign, from held-out ``ratios`` of rows of ``campaigns`` (module
    docstring): exp(mu + t_q(df) sqrt(sigma_w^2 + sigma_b^2 + Var(mu)))."""
    if df < 1:
        raise ValueError(f"df={df} must be >= 1: the noise estimate needs two campaigns or more")
    log_r = np.log(np.asarray(ratios, dtype=np.float64))
    g = campaign_index(list(campaigns))
    n = np.bincount(g).astype(np.float64)
    sw2, sb2 = noise.within_log_sd**2, noise.shared_log_sd**2
    # Searle et al. 1992 §3.6: GLS mean of the campaign means and its variance
    mu, var_mu = gls_mean(n, np.bincount(g, weights=log_r) / n, sw2, sb2)
    sd = math.sqrt(sw2 + sb2 + var_mu)
    return {
        "n": len(log_r),
        "low": math.exp(mu + float(stdtrit(df, low_q)) * sd),
        "high": math.exp(mu + float(stdtrit(df, high_q)) * sd),
        "log_centre": mu,
        "log_sd": sd,
        "df": df,
        "within_log_sd": noise.within_log_sd,
        "centre_log_sd": math.sqrt(var_mu),
    }


def conformal_band(
    values: Sequence[float] | FloatArray,
    low_q: float,
    high_q: float,
    *,
    effective_n: float | None = None,
) -> dict[str, Any]:
    """The split-conformal ``low_q``-``high_q`` band of ``values``.

    With n exchangeable values the band is the floor((n+1) low_q)-th to the ceil((n+1) high_q)-th
    smallest (Lei et al. 2018, JASA 113:1094, eq. 2.2; Vovk et al. 2005): it covers a new value
    with probability >= high_q - low_q where plain empirical quantiles fall short on few values.
    Correlated values are worth ``effective_n`` < n independent ones (``effective_rows``), so the
    finite-sample correction uses that count: the upper end is the empirical quantile of level
    high_q (m+1)/m, m = effective_n, of the n values (rank ceil(n high_q (m+1)/m)), the lower
    end its mirror; with m = n these are the ranks above. A level past the last value (the
    conformal band is unbounded) is clipped to the extreme value, which ``min_rows`` keeps from
    mattering: with m >= 10 the 90 % end's level is at most 0.99.
    """
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    n = len(ordered)
    m = float(n if effective_n is None else effective_n)
    if n and not 0 < m <= n + 1e-9:
        raise ValueError(f"effective_n={effective_n} must lie in (0, n={n}]")
    # 1e-9: n high_q (m+1)/m is an integer in exact arithmetic when m = n and (n+1) high_q is
    hi_rank = math.ceil(n * high_q * (m + 1) / m - 1e-9) if n else 0
    lo_rank = n + 1 - math.ceil(n * (1 - low_q) * (m + 1) / m - 1e-9) if n else 0
    lo, hi = max(lo_rank, 1), min(hi_rank, n)
    return {"n": n, "low": float(ordered[lo - 1]), "high": float(ordered[hi - 1])}


def effective_rows(campaigns: Sequence[str], noise: NoiseModel) -> float:
    """Independent rows that rows of these campaigns are worth (design effect per campaign)."""
    return float(sum(noise.effective_rows(n) for n in Counter(campaigns).values()))


def build_bands(
    parts: Sequence[Sequence[str]],
    ratios: Sequence[float] | FloatArray,
    campaigns: Sequence[str],
    *,
    noise: NoiseModel,
    low_q: float,
    high_q: float,
    rule: BandRule = "model",
    df: int | None = None,
) -> dict[str, dict[str, Any]]:
    """A band for every regime key and every parent of it, from each row's regime ``parts``,
    its held-out measured / predicted ratio and its campaign. ``rule``: the noise model's
    predictive band (shipped; ``df`` the noise estimate's between-campaign degrees of freedom)
    or the earlier split-conformal ranks on the effective rows or on every row."""
    if not len(parts) == len(ratios) == len(campaigns):
        raise ValueError("parts, ratios and campaigns must have one entry per row")
    members: dict[str, list[int]] = {}
    for i, p in enumerate(parts):
        for key in fallback_keys(p):
            members.setdefault(key, []).append(i)
    values = np.asarray(ratios, dtype=np.float64)
    out = {}
    for key, ids in sorted(members.items()):
        camps = [campaigns[i] for i in ids]
        eff = effective_rows(camps, noise)
        if rule == "model":
            dof = 0 if df is None else df  # model_band refuses < 1 with the reason
            band = model_band(values[ids], camps, noise, df=dof, low_q=low_q, high_q=high_q)
        else:
            m = eff if rule == "conformal-effective" else None
            band = conformal_band(values[ids], low_q, high_q, effective_n=m)
        out[key] = {**band, "campaigns": len(set(camps)), "effective_rows": round(eff, 2)}
    return out
