"""Calibration that is honest with few rows: fit only what the rows identify, toward the prior.

The fit is a maximum a-posteriori estimate. Each coefficient lives in a standardised coordinate
``z`` (0 = the prior profile, 1 = one prior width away): in log space where the prior value is
positive (efficiencies, overheads: a ratio change is what a row sees), linearly where it is zero
(``attention_score_bytes`` with flash attention). The cost is

    sum_rows w_i log(pred_i / measured_i)^2 + sum_coefficients z^2

that is Gaussian row noise plus a Gaussian prior of one ``BOUNDS`` width per coefficient (a ridge
in log space whose strength is the ratio of the two variances; Bishop, PRML §3.3, eq. 3.55).
The row weight w_i is 1 / (sigma^2 (1 + (n - 1) rho)): rows of one campaign (a source on one GPU
type, n rows) share an error component (:mod:`planner.calibration.noise`), so 68 rows of one
benchmark suite pull the coefficients about as hard as 3 independent rows would, not 68.

Two roles, two pairs (``bench/results/noise.md``). The *prediction noise* (``NOISE``: REML on the
shipped fit's leave-one-source-out residuals) says how far a new campaign's rows fall from a
prediction: the band, the cluster level's shrinkage and suggest's uncertainty use it. The *fit
weighting* (``FIT_NOISE``: sigma and rho of the weights above) is the ridge's strength, a
hyperparameter: m x the REML pair, m chosen by leave-one-source-out cross-validation on a grid
fixed in advance, its error reported by nested cross-validation (``python -m bench.fit_weighting``).
They differ because a campaign's overall shift (sigma_b) is not how far its rows mislead the
coefficients.

Identification (:mod:`planner.calibration.identify`) keeps a coefficient at its prior unless the
rows carry at least as much information about it as the prior does: two bf16 rows have zero
sensitivity to the fp8 GEMM plateau, single-node rows to the network efficiency, so neither moves.

The solver is Gauss-Newton on the Jacobian taken once at the prior and refreshed by Broyden's
rank-one update (Nocedal & Wright §11.1): the Jacobian at the prior does not depend on the
measured values, so the cross-validation folds reuse it without seeing the held-out rows
(:mod:`planner.calibration.honest_cv`). That is what makes ``planner calibrate`` take seconds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from planner.calibration import fit as _fit
from planner.calibration.fit import ErrorStats, usable
from planner.calibration.identify import Coordinates, identify, sensitivity
from planner.calibration.measurements import Measurement
from planner.calibration.noise import NoiseModel, campaign_index, campaign_key
from planner.layouts import FloatArray
from planner.performance.profile import PerformanceProfile

NOISE_LOG_SD = 0.048
"""Prediction noise sigma_w: sd of one row's log error around its campaign's shift, for a
campaign the model has not seen (the band, the level's shrinkage, suggest's uncertainty)."""
NOISE_SHARED_LOG_SD = 0.025
"""Prediction noise sigma_b: sd of a campaign's shift shared by all its rows.

Both by the rule of ``bench/results/noise.md`` (``python -m bench.noise``): REML
(:func:`planner.calibration.variance_components.reml`, campaigns as groups) on the
leave-one-source-out log residuals of the shipped fit (weighted by ``FIT_NOISE``) on the 101
usable shared rows (4 campaigns): sigma_w 0.0479 (95 % profile-likelihood CI 0.042-0.056),
sigma_b 0.0254 (CI 0.010-0.081: three between-campaign degrees of freedom), rho 0.22; rounded
to 3 decimals. ``tests/bench/test_noise_estimate.py`` fails if they drift from the rule's
output. One value for every campaign. A new cluster's level and ``--suggest`` take the band's
between-campaign tau instead (``level.new_cluster_noise``); this is their fallback."""
NOISE = NoiseModel(within_log_sd=NOISE_LOG_SD, shared_log_sd=NOISE_SHARED_LOG_SD)
"""The prediction noise: statements about how far a new campaign's rows fall from a prediction."""
FIT_ROW_LOG_SD = 0.104
"""Fit weighting sigma_w: the row noise the coefficient fit weighs rows with (a row's precision
against the prior widths). A regularisation hyperparameter, not a noise estimate."""
FIT_SHARED_LOG_SD = 0.060
"""Fit weighting sigma_b: the shared campaign error of the fit's design effect.

The pair is m x (0.052, 0.030) (the REML pair, rho kept), m chosen from {0.5, 0.75, 1, 1.5, 2, 3}
by the median leave-one-source-out error on the 101 shared rows, ties to the larger m
(``bench/results/noise.md``, ``python -m bench.fit_weighting``): m = 2 (median 2.6 %; 4.0 % at
m = 1). Nested cross-validation of that choice (m chosen without the held-out source): median
4.5 %, p90 11.4 %; the folds choose m = 0.5 or 2, so four sources do not pin it down.
``tests/bench/test_fit_weighting.py`` fails if the shipped pair is not the rule's choice."""
FIT_NOISE = NoiseModel(within_log_sd=FIT_ROW_LOG_SD, shared_log_sd=FIT_SHARED_LOG_SD)
"""The fit weighting: how strongly a campaign's rows pull the coefficients from the priors."""
ITERATIONS = 6
"""Gauss-Newton steps; each costs one prediction of the rows (the fit converges in 3-5)."""
MOVED_REL = 0.005
"""A coefficient 'moved' when its fitted value differs from the prior by more than 0.5 %."""


def default_candidates() -> tuple[str, ...]:
    """The coefficients a calibration may fit: the fit module's list, read at call time so a
    coefficient added there (with its ``BOUNDS`` entry) is considered here too."""
    return tuple(n for n in _fit.DEFAULT_COEFFICIENTS if n in _fit.BOUNDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class CoefficientChange:
    """One candidate coefficient: its prior, its fitted value and whether the rows identify it."""

    name: str
    prior: float
    fitted: float
    identified: bool
    information: float
    """Rows' Fisher information about the coefficient relative to the prior's (>= 1 fits it)."""
    reason: str
    """Why it was fitted or kept at its prior, in words."""

    @property
    def change(self) -> float:
        """Relative change fitted / prior - 1 (absolute change when the prior is 0)."""
        if self.prior == 0:
            return self.fitted
        return self.fitted / self.prior - 1.0

    @property
    def moved(self) -> bool:
        return self.identified and abs(self.change) > MOVED_REL

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "prior": self.prior,
            "fitted": self.fitted,
            "change_pct": None if self.prior == 0 else round(100 * self.change, 2),
            "identified": self.identified,
            "moved": self.moved,
            "information": round(self.information, 3),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RegularisedFit:
    profile: PerformanceProfile
    coefficients: tuple[CoefficientChange, ...]
    before: ErrorStats
    """In-sample error of the prior profile on the rows."""
    after: ErrorStats
    """In-sample error of the fitted profile (the CV error is the honest one)."""
    n_rows: int
    iterations: int

    @property
    def moved(self) -> tuple[CoefficientChange, ...]:
        return tuple(c for c in self.coefficients if c.moved)


def solve(
    problem: _fit._Groups,
    measured: FloatArray,
    coords: Coordinates,
    jacobian: FloatArray,
    *,
    noise: float = FIT_ROW_LOG_SD,
    iterations: int = ITERATIONS,
    groups: np.ndarray | None = None,
    shared_noise: float = FIT_SHARED_LOG_SD,
    centred: bool = False,
) -> tuple[FloatArray, int]:
    """MAP coordinates z of the identified coefficients (see the module docstring).

    ``jacobian`` is d log(pred) / dz at z = 0 for the rows of ``problem``, columns of the
    identified coefficients only. ``groups``: each row's campaign (0..G-1; None: all rows one
    campaign); ``noise`` and ``shared_noise``: sigma_w and sigma_b. Returns (z, prediction calls
    spent). ``centred``: fit the rows' contrasts only (residuals and Jacobian less their
    weighted mean), the common shift being the cluster's level (:mod:`.level`).
    """
    k = jacobian.shape[1]
    z = np.zeros(k)
    if k == 0 or len(measured) == 0:
        return z, 0
    model = NoiseModel(within_log_sd=noise, shared_log_sd=shared_noise)
    g = np.zeros(len(measured), dtype=np.intp) if groups is None else np.asarray(groups)

    weights = model.weights(g)

    def whiten(x: FloatArray) -> FloatArray:
        return model.whiten(centre(x, weights) if centred else x, g)

    log_meas = np.log(measured)
    jac = jacobian.copy()
    log_pred = np.log(np.maximum(problem.predict(coords.profile(z)), 1e-12))
    calls = 1
    cost = _cost(whiten(log_pred - log_meas), z)
    for _ in range(iterations):
        r = whiten(log_pred - log_meas)
        j = whiten(jac)
        step = -np.linalg.solve(j.T @ j + np.eye(k), j.T @ r + z)
        accepted = False
        for scale in (1.0, 0.5, 0.25):  # backtracking: the Jacobian is an approximation
            z_new = coords.clip(z + scale * step)
            new_pred = np.log(np.maximum(problem.predict(coords.profile(z_new)), 1e-12))
            calls += 1
            new_cost = _cost(whiten(new_pred - log_meas), z_new)
            if new_cost < cost:
                accepted = True
                break
        if not accepted:
            break
        dz = z_new - z
        # Broyden's rank-one update: the change of prediction the step actually produced
        jac = jac + np.outer(new_pred - log_pred - jac @ dz, dz) / max(float(dz @ dz), 1e-12)
        improvement = cost - new_cost
        z, log_pred, cost = z_new, new_pred, new_cost
        if improvement < 1e-6 * max(cost, 1.0):
            break
    return z, calls


def centre(values: FloatArray, weights: FloatArray) -> FloatArray:
    """``values`` (rows first) less their ``weights``-weighted mean over the rows: the part a
    common shift of all rows cannot explain (the within-cluster estimator of a random-effects
    model once the shared offset is estimated, Searle, Casella & McCulloch 1992, ch. 3)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) == 0:
        return x
    w = np.asarray(weights, dtype=np.float64).reshape((-1,) + (1,) * (x.ndim - 1))
    out: FloatArray = x - np.sum(w * x, axis=0) / np.sum(w)
    return out


def _cost(white_err: FloatArray, z: FloatArray) -> float:
    return float(np.sum(white_err**2) + np.sum(z**2))


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """Rows, their predictions and Jacobian at the prior: computed once, shared by the fit and
    every cross-validation fold (the Jacobian at the prior does not depend on measured values)."""

    rows: tuple[Measurement, ...]
    measured: FloatArray
    coords: Coordinates
    base_pred: FloatArray
    jacobian: FloatArray
    noise: float
    """sigma_w, the within-campaign row noise."""
    shared_noise: float = FIT_SHARED_LOG_SD
    """sigma_b, the campaign's shared error (campaigns: :func:`noise.campaign_key` of a row)."""
    centred: bool = False
    """The coefficients fit the rows' contrasts only: their common shift is the cluster's level,
    fitted before them (:func:`planner.calibration.level.with_level`)."""

    @property
    def noise_model(self) -> NoiseModel:
        return NoiseModel(within_log_sd=self.noise, shared_log_sd=self.shared_noise)


def prepare(
    measurements: Sequence[Measurement],
    prior: PerformanceProfile,
    *,
    candidates: Sequence[str] | None = None,
    noise: float = FIT_ROW_LOG_SD,
    shared_noise: float = FIT_SHARED_LOG_SD,
) -> Prepared:
    """The usable rows with their prediction and sensitivity at ``prior``; ``noise`` and
    ``shared_noise`` are sigma_w and sigma_b (``shared_noise=0``: independent rows)."""
    rows = tuple(usable(measurements))
    names = tuple(candidates) if candidates is not None else default_candidates()
    for name in names:
        if name not in _fit.BOUNDS:
            raise ValueError(f"unknown coefficient {name!r}; fit one of {', '.join(_fit.BOUNDS)}")
    coords = Coordinates(prior, names)
    if rows:
        base_pred, jac = sensitivity(_fit._Groups(rows), coords)
    else:
        base_pred, jac = np.empty(0), np.zeros((0, len(names)))
    return Prepared(
        rows=rows,
        measured=np.array([m.tokens_per_s_per_gpu for m in rows], dtype=np.float64),
        coords=coords,
        base_pred=base_pred,
        jacobian=jac,
        noise=noise,
        shared_noise=shared_noise,
    )


def fit_regularised(
    measurements: Sequence[Measurement],
    prior: PerformanceProfile,
    *,
    candidates: Sequence[str] | None = None,
    noise: float = FIT_ROW_LOG_SD,
    shared_noise: float = FIT_SHARED_LOG_SD,
    iterations: int = ITERATIONS,
) -> RegularisedFit:
    """Fit the coefficients ``measurements`` identify, regularised toward ``prior``."""
    prepared = prepare(
        measurements, prior, candidates=candidates, noise=noise, shared_noise=shared_noise
    )
    return fit_prepared(prepared, iterations=iterations)


def fit_prepared(
    prepared: Prepared,
    subset: Sequence[int] | np.ndarray | None = None,
    *,
    iterations: int = ITERATIONS,
) -> RegularisedFit:
    """The fit on ``prepared``'s rows (or the ``subset`` of them: a cross-validation fold)."""
    idx = np.arange(len(prepared.rows)) if subset is None else np.asarray(subset, dtype=np.intp)
    rows = [prepared.rows[int(i)] for i in idx]
    measured = prepared.measured[idx]
    jac_all = prepared.jacobian[idx]
    coords_all = prepared.coords
    noise = prepared.noise_model
    campaigns = [campaign_key(m) for m in rows]
    groups = campaign_index(campaigns)
    jac_info = centre(jac_all, noise.weights(groups)) if prepared.centred else jac_all
    ident = identify(
        jac_all,
        names=coords_all.names,
        noise=noise.within_log_sd,
        whitened=noise.whiten(jac_info, groups),
    )
    problem = _fit._Groups(rows)
    keep = np.flatnonzero(ident.identified)
    coords = coords_all.subset(keep)
    z, calls = solve(
        problem,
        measured,
        coords,
        jac_all[:, keep],
        noise=noise.within_log_sd,
        iterations=iterations,
        groups=groups,
        shared_noise=noise.shared_log_sd,
        centred=prepared.centred,
    )
    fitted = coords.profile(z)
    after = problem.predict(fitted) if rows else np.empty(0)
    base_pred = prepared.base_pred[idx]
    changes = tuple(
        CoefficientChange(
            name=name,
            prior=float(getattr(coords_all.prior, name)),
            fitted=float(getattr(fitted, name)),
            identified=bool(ident.identified[i]),
            information=float(ident.information[i]),
            reason=ident.reasons[i],
        )
        for i, name in enumerate(coords_all.names)
    )
    before_stats = ErrorStats.of(base_pred, measured)
    after_stats = ErrorStats.of(after, measured)
    provenance = {
        "kind": "fitted",
        "method": "regularised (MAP, log-space ridge toward the prior; identified coefficients; "
        "rows of one campaign share an error component)",
        "fitted_on": sorted({m.source_id for m in rows}),
        "rows": [m.row_id for m in rows],
        "n_rows": len(rows),
        "coefficients": [c.name for c in changes if c.identified],
        "not_identified": [c.name for c in changes if not c.identified],
        "noise_log_sd": noise.within_log_sd,
        "shared_noise_log_sd": noise.shared_log_sd,
        "campaigns": {
            c: {"rows": n, "effective_rows": round(noise.effective_rows(n), 2)}
            for c, n in sorted(Counter(campaigns).items())
        },
        "median_ape_before": _nan_none(before_stats.median_ape),
        "median_ape_after": _nan_none(after_stats.median_ape),
        "p90_ape_after": _nan_none(after_stats.p90_ape),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "base": coords_all.prior.provenance,
    }
    return RegularisedFit(
        profile=replace(fitted, provenance=provenance),
        coefficients=changes,
        before=before_stats,
        after=after_stats,
        n_rows=len(rows),
        iterations=calls,
    )


def _nan_none(x: float) -> float | None:
    return None if math.isnan(x) else x
