"""Ranking of evaluated layouts and their Pareto front, vectorised.

Scores are "higher is better" (see :meth:`planner.search.objectives.Objective.score`). Two
scores that
agree to ``rel_tol`` count as a tie, because the performance model is not more precise than
that and layouts that differ only in a knob the model ignores should then be ordered by what
does differ: memory headroom first (a safer launch), then fewer GPUs (a cheaper one).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_REL_TOL = 1e-9


def _quantized(score: FloatArray, rel_tol: float) -> FloatArray:
    """Scores rounded to rel_tol of the largest magnitude, so near-equal scores tie exactly."""
    s = np.asarray(score, dtype=np.float64)
    finite = np.isfinite(s)
    if not finite.any():
        return np.where(np.isnan(s), -np.inf, s)
    scale = float(np.max(np.abs(s[finite]))) or 1.0
    step = scale * rel_tol
    q = np.where(finite, np.round(np.where(finite, s, 0.0) / step) * step, s)
    return np.where(np.isnan(q), -np.inf, q)


def rank_order(
    score: FloatArray,
    headroom_bytes: FloatArray,
    num_gpus: npt.ArrayLike,
    *,
    rel_tol: float = DEFAULT_REL_TOL,
) -> IntArray:
    """Indices from best to worst: score desc, then headroom desc, then GPUs asc, then index."""
    n = len(score)
    q = _quantized(score, rel_tol)
    head = np.nan_to_num(np.asarray(headroom_bytes, dtype=np.float64), nan=-np.inf)
    gpus = np.asarray(num_gpus, dtype=np.float64)
    # np.lexsort sorts by the last key first; the index key makes the order total
    order = np.lexsort((np.arange(n), gpus, -head, -q))
    return order.astype(np.int64)


def pareto_front(
    score: FloatArray,
    headroom_bytes: FloatArray,
    *,
    rel_tol: float = DEFAULT_REL_TOL,
    headroom_step_bytes: float = 0.0,
) -> IntArray:
    """Indices of the non-dominated layouts in (score, headroom), both maximised.

    A layout is dominated when another is at least as good in both and better in one. Among
    exact duplicates only the first index is kept. Returned best score first. With
    ``headroom_step_bytes`` > 0, headroom is floored to that step first, so that a few MiB more
    headroom does not keep a slower layout on the front.
    """
    n = len(score)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    q = _quantized(score, rel_tol)
    head = np.nan_to_num(np.asarray(headroom_bytes, dtype=np.float64), nan=-np.inf)
    if headroom_step_bytes > 0:
        head = np.floor(head / headroom_step_bytes) * headroom_step_bytes
    order = np.lexsort((np.arange(n), -head, -q))
    h_sorted = head[order]
    # a point survives iff its headroom beats every point with a better (or equal) score
    # before it; ties in score are sorted by headroom, so the first of each tie wins
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(h_sorted)[:-1]))
    keep = h_sorted > best_before
    return order[keep].astype(np.int64)
