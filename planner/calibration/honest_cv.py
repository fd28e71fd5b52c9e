"""Cross-validated error of a regularised calibration on the user's own rows, with its spread.

Folds hold out whole groups (a sweep or a source: rows of one sweep share a setup, so holding out
one row while its siblings train would flatter the fit); with more groups than ``MAX_FOLDS`` the
groups are dealt round-robin into ``MAX_FOLDS`` folds (k-fold over groups), and with one group
only, rows are (k-fold over rows, stated in ``method``). Every fold refits on the other rows
with the Jacobian taken at the prior, which no measured value enters
(:mod:`planner.calibration.regularised`), and predicts its held-out rows with the full model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.calibration.fit import ErrorStats, predict_tokens_per_s
from planner.calibration.level import prepared_level, with_level
from planner.calibration.measurements import Measurement
from planner.calibration.noise import NoiseModel
from planner.calibration.regularised import ITERATIONS, Prepared, fit_prepared
from planner.layouts import FloatArray

MAX_FOLDS = 10
MIN_ROWS = 3
"""Fewer rows than this give no cross-validated figure (one row predicts nothing)."""

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class HonestCV:
    method: str
    """How the rows were split, e.g. 'leave-one-sweep-out (6 folds)'."""
    folds: int
    before: ErrorStats
    """Held-out error of the prior profile."""
    after: ErrorStats
    """Held-out error of the profile fitted without the fold."""
    fold_median_ape: tuple[float, ...] = ()
    """Median APE of each fold (the spread across folds)."""
    predictions: dict[str, dict[str, float]] = field(default_factory=dict)
    """row_id -> measured, before, after (tokens/s per GPU, held out)."""
    level_only: ErrorStats | None = None
    """Held-out error of the prior with the fold's cluster level and no coefficient fit (None:
    the level was not fitted)."""


def make_folds(keys: Sequence[str], *, max_folds: int = MAX_FOLDS) -> tuple[list[list[int]], str]:
    """Row indexes per fold, and the method in words. ``keys``: each row's group."""
    groups = sorted(set(keys))
    n = len(keys)
    if len(groups) >= 2:
        if len(groups) <= max_folds:
            folds = [[i for i, k in enumerate(keys) if k == g] for g in groups]
            return folds, f"leave-one-group-out ({len(folds)} folds)"
        slot = {g: j % max_folds for j, g in enumerate(groups)}
        folds = [[i for i, k in enumerate(keys) if slot[k] == f] for f in range(max_folds)]
        return folds, f"{max_folds}-fold over {len(groups)} groups"
    k = min(n, max_folds)
    return [list(range(f, n, k)) for f in range(k)], f"{k}-fold over rows (one group only)"


def cross_validate_prepared(
    prepared: Prepared,
    keys: Sequence[str],
    *,
    group_name: str = "group",
    max_folds: int = MAX_FOLDS,
    iterations: int = ITERATIONS,
    progress: Progress | None = None,
    fit_level: bool = False,
    level_noise: NoiseModel | None = None,
) -> HonestCV | None:
    """Held-out error of the regularised fit on ``prepared``'s rows; None below MIN_ROWS.

    ``fit_level``: each fold first fits the cluster's level on its training rows
    (:mod:`planner.calibration.level`), then the coefficients on what is left, as the
    calibration does; ``level_only`` is then the held-out error of the level alone.
    ``level_noise``: the level's noise model (``level.new_cluster_noise``), required with it."""
    if fit_level and level_noise is None:
        raise ValueError("fit_level needs level_noise (level.new_cluster_noise of the table)")
    n = len(prepared.rows)
    if n < MIN_ROWS:
        return None
    folds, method = make_folds(keys, max_folds=max_folds)
    method = method.replace("group", group_name)
    after: FloatArray = np.empty(n)
    levelled: FloatArray = np.empty(n)
    fold_medians = []
    for f, held in enumerate(folds):
        out = set(held)
        train = [i for i in range(n) if i not in out]
        fold = prepared
        if fit_level:
            assert level_noise is not None  # checked above
            level = prepared_level(prepared, train, noise=level_noise)
            fold = with_level(prepared, level)
            levelled[held] = fold.base_pred[held]
        fitted = fit_prepared(fold, train, iterations=iterations).profile
        held_rows: list[Measurement] = [prepared.rows[i] for i in held]
        after[held] = predict_tokens_per_s(held_rows, fitted)
        fold_medians.append(ErrorStats.of(after[held], prepared.measured[held]).median_ape)
        if progress is not None:
            progress(f + 1, len(folds))
    before = prepared.base_pred
    return HonestCV(
        method=method,
        folds=len(folds),
        before=ErrorStats.of(before, prepared.measured),
        after=ErrorStats.of(after, prepared.measured),
        fold_median_ape=tuple(fold_medians),
        level_only=ErrorStats.of(levelled, prepared.measured) if fit_level else None,
        predictions={
            m.row_id: {
                "measured": float(prepared.measured[i]),
                "before": float(before[i]),
                "after": float(after[i]),
            }
            for i, m in enumerate(prepared.rows)
        },
    )
