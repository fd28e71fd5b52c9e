"""Building the prediction bands of :mod:`planner.calibration.intervals` from held-out residuals.

A band is the split-conformal 10th-90th percentile of measured / predicted tokens/s among the
held-out rows of a regime (and of every parent of it). Its rows are not independent: rows of one
campaign (a source on one GPU type) share an error component (:mod:`planner.calibration.noise`),
so a regime whose rows come from one benchmark suite measures that suite's errors, not those of
a new cluster. A band therefore records the *effective* rows of its members, each campaign
counted by the design effect with the fit's rho, and the table lets a regime use its own band
only with at least ``min_rows`` effective rows (else its parent's): with rho 0.29 a campaign is
worth at most 1 / rho = 3.4 rows, so a regime needs rows of three or more campaigns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from planner.calibration.intervals import fallback_keys
from planner.calibration.noise import NoiseModel
from planner.layouts import FloatArray


def conformal_band(
    values: Sequence[float] | FloatArray, low_q: float, high_q: float
) -> dict[str, Any]:
    """The split-conformal ``low_q``-``high_q`` band of ``values``: the floor((n+1) low_q)-th and
    ceil((n+1) high_q)-th smallest (Lei et al. 2018, JASA 113:1094, eq. 2.2), which covers a new
    exchangeable value with probability >= high_q - low_q where plain empirical quantiles fall
    short on few values."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    n = len(ordered)
    lo = max(int(np.floor((n + 1) * low_q)), 1)
    hi = min(int(np.ceil((n + 1) * high_q)), n)
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
) -> dict[str, dict[str, Any]]:
    """A band for every regime key and every parent of it, from each row's regime ``parts``,
    its held-out measured / predicted ratio and its campaign."""
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
        out[key] = {
            **conformal_band(values[ids], low_q, high_q),
            "campaigns": len(set(camps)),
            "effective_rows": round(effective_rows(camps, noise), 2),
        }
    return out
