"""Which coefficients a set of measured rows identifies: a sensitivity (Jacobian) check.

A coefficient is identified when the rows' Fisher information about it, sum_i J_ij^2 / sigma^2
(J: d log(predicted tokens/s) per prior width, sigma: a row's log noise), is at least the
prior's (1 per prior width): then the data, not the prior, decides its value (Bishop, PRML
§3.5.3: the effective number of parameters counts eigenvalues of the data term above the prior
precision). A coefficient no row's prediction depends on (the fp8 GEMM plateau on bf16 rows, the
network efficiency on single-node rows) has information 0 and keeps its prior exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.calibration import fit as _fit
from planner.layouts import FloatArray
from planner.performance.profile import PerformanceProfile

LOG_SD_CAP = 1.0
"""Widest prior in log space (a factor e): BOUNDS widths of overheads exceed their priors."""
STEP = 0.1
"""Finite-difference step in prior widths for the Jacobian."""
MIN_INFORMATION = 1.0
"""Rows' information about a coefficient, relative to the prior's, above which it is fitted."""
ZERO_SENSITIVITY = 1e-9


class Coordinates:
    """Standardised coordinates z of some coefficients around a prior profile (z = 0: the
    prior; z = 1: one prior width, ``fit.BOUNDS``). Log space where the prior is positive."""

    def __init__(self, prior: PerformanceProfile, names: Sequence[str]) -> None:
        self.prior = prior
        self.names = tuple(names)
        lo = np.array([_fit.BOUNDS[n][0] for n in self.names], dtype=np.float64)
        hi = np.array([_fit.BOUNDS[n][1] for n in self.names], dtype=np.float64)
        width = np.array([_fit.BOUNDS[n][2] for n in self.names], dtype=np.float64)
        x0 = np.clip([float(getattr(prior, n)) for n in self.names], lo, hi)
        self.x0 = np.asarray(x0, dtype=np.float64)
        self.log = self.x0 > 0
        safe = np.where(self.log, self.x0, 1.0)
        self.sd = np.where(self.log, np.minimum(width / safe, LOG_SD_CAP), width)
        lo_pos = np.maximum(lo, safe * 1e-6)
        self.z_lo = np.where(self.log, np.log(lo_pos / safe) / self.sd, (lo - self.x0) / self.sd)
        self.z_hi = np.where(self.log, np.log(hi / safe) / self.sd, (hi - self.x0) / self.sd)

    def values(self, z: FloatArray) -> FloatArray:
        return np.where(self.log, self.x0 * np.exp(self.sd * z), self.x0 + self.sd * z)

    def profile(self, z: FloatArray) -> PerformanceProfile:
        x = self.values(np.asarray(z, dtype=np.float64))
        return self.prior.with_coefficients(
            **{n: float(v) for n, v in zip(self.names, x, strict=True)}
        )

    def clip(self, z: FloatArray) -> FloatArray:
        return np.clip(z, self.z_lo, self.z_hi)

    def subset(self, keep: Sequence[int] | np.ndarray) -> Coordinates:
        return Coordinates(self.prior, [self.names[int(i)] for i in keep])


def sensitivity(problem: _fit._Groups, coords: Coordinates) -> tuple[FloatArray, FloatArray]:
    """(predicted tokens/s at the prior, d log(pred) / dz per row and coefficient).

    Forward differences of ``STEP`` prior widths (backward where the prior sits at its upper
    bound). Costs one prediction of the rows per coefficient, plus one.
    """
    k = len(coords.names)
    base = problem.predict(coords.profile(np.zeros(k)))
    log_base = np.log(np.maximum(base, 1e-12))
    jac = np.zeros((len(base), k))
    for j in range(k):
        step = STEP if coords.z_hi[j] >= STEP else -STEP
        z = np.zeros(k)
        z[j] = step
        jac[:, j] = (
            np.log(np.maximum(problem.predict(coords.profile(z)), 1e-12)) - log_base
        ) / step
    return base, jac


@dataclass(frozen=True, slots=True, kw_only=True)
class Identification:
    names: tuple[str, ...]
    information: FloatArray
    """Rows' Fisher information per coefficient relative to the prior's (1 per prior width)."""
    identified: np.ndarray
    reasons: tuple[str, ...]


def identify(
    jacobian: FloatArray,
    *,
    names: Sequence[str] = (),
    noise: float,
    min_information: float = MIN_INFORMATION,
    whitened: FloatArray | None = None,
) -> Identification:
    """Which columns of ``jacobian`` (d log pred / dz) the rows identify; with reasons.

    ``whitened``: the Jacobian already multiplied by Sigma^-1/2 of correlated row noise
    (:mod:`planner.calibration.noise`); the information is then diag(J' Sigma^-1 J) and
    ``noise`` is not used for it.
    """
    if not len(jacobian):
        info = np.zeros(jacobian.shape[1])
    elif whitened is not None:
        info = np.sum(whitened**2, axis=0)
    else:
        info = np.sum(jacobian**2, axis=0) / noise**2
    peak = np.max(np.abs(jacobian), axis=0) if len(jacobian) else np.zeros(jacobian.shape[1])
    identified = info >= min_information
    reasons = []
    for i in range(jacobian.shape[1]):
        if peak[i] < ZERO_SENSITIVITY:
            reasons.append("no row's prediction depends on it: kept at the prior")
        elif not identified[i]:
            reasons.append(
                f"the rows carry {info[i]:.2f}x the prior's information "
                f"(a prior width moves no row by more than {100 * _pct(peak[i]):.1f} %): "
                "kept at the prior"
            )
        else:
            reasons.append(f"identified: the rows carry {info[i]:.1f}x the prior's information")
    return Identification(
        names=tuple(names),
        information=info,
        identified=identified,
        reasons=tuple(reasons),
    )


def _pct(log_change: float) -> float:
    return math.expm1(abs(log_change))
