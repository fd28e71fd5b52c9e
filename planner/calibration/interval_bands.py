"""Building the prediction bands of :mod:`planner.calibration.intervals` from held-out residuals.

A band is the split-conformal 80 % band (10 % each side) of measured / predicted tokens/s among
the held-out rows of a regime (and of every parent of it). Its rows are not independent: rows of one
campaign (a source on one GPU type) share an error component (:mod:`planner.calibration.noise`),
so a regime whose rows come from one benchmark suite measures that suite's errors, not those of
a new cluster. A band therefore records the *effective* rows of its members, each campaign
counted by the design effect with the fit's rho, and the table lets a regime use its own band
only with at least ``min_rows`` effective rows (else its parent's): with rho 0.29 a campaign is
worth at most 1 / rho = 3.4 rows, so a regime needs rows of three or more campaigns.

The same count sets the band's finite-sample correction (``conformal_band``): the split-conformal
rank ceil((n+1)(1-alpha)) of n scores (Lei et al. 2018) with n the effective rows, not the rows.
Why that count: the correction exists because the quantile is estimated from few values, and
the variance of a sample quantile under cluster sampling is the independent one times the design
effect of the indicator 1{score <= q} (Francisco & Fuller 1991, Ann. Stat. 19:454), which the
design effect of the scores themselves bounds from above for a Gaussian shared component (an
indicator's intra-cluster correlation is below that of the values); so the effective rows are
a conservative size of the calibration set. It is a plug-in, not a guarantee: conformal coverage
is exact for exchangeable units, and the units a new cluster is exchangeable with are campaigns,
of which the shared rows have four (with k campaigns an 80 % band for a new campaign's shift is
unbounded unless ceil((k+1) 0.9) <= k, i.e. k >= 9).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from planner.calibration.intervals import fallback_keys
from planner.calibration.noise import NoiseModel
from planner.layouts import FloatArray


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
    conformal_count: Literal["effective", "rows"] = "effective",
) -> dict[str, dict[str, Any]]:
    """A band for every regime key and every parent of it, from each row's regime ``parts``,
    its held-out measured / predicted ratio and its campaign. ``conformal_count``: the number
    of values the conformal ranks use, the effective rows (shipped) or every row (the earlier
    rule, kept for the bench's before/after)."""
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
        m = eff if conformal_count == "effective" else None
        out[key] = {
            **conformal_band(values[ids], low_q, high_q, effective_n=m),
            "campaigns": len(set(camps)),
            "effective_rows": round(eff, 2),
        }
    return out
