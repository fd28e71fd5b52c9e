"""Calibrate the throughput model's coefficients on measured runs, and cross-validate it.

``fit_profile`` solves a bounded least-squares problem on log(predicted / measured) tokens/s
per GPU, with a soft prior pulling every coefficient toward the base profile (so that a handful
of rows cannot drag a coefficient that they barely constrain to a bound). ``cross_validate``
holds out one group (a source, a sweep, a GPU type, a model family, a stack or a cluster:
:data:`GROUPINGS`) at a time, fits on the rest and predicts the held-out rows, which gives the
honest, out-of-sample error and ranking quality. Rows whose reliability is 'low' are used neither
for fitting nor for accuracy figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from planner.calibration.measurements import Measurement
from planner.calibration.transfer import model_family, transfer_profile
from planner.layouts import FloatArray, LayoutBatch
from planner.performance.step_time import PerformanceProfile, estimate_performance
from planner.specs import GPUSpec

GROUPINGS = ("source", "sweep", "gpu", "family", "stack", "cluster")
"""Held-out groups of :func:`cross_validate`: a publication, a sweep, a GPU type, a model family,
a software stack (the job's stack fields and the layout's CUDA graphs and gradient dtype), a
cluster (GPU type, GPUs per node and network bandwidth per GPU: the cluster as the model sees
it)."""

DEFAULT_COEFFICIENTS = (
    "gemm_efficiency",
    "fp8_gemm_efficiency",
    "attention_efficiency",
    # nvlink_efficiency / network_efficiency: only GPUs without collective curves use them
    # (planner.performance.collectives); every GPU of the shared rows has curves
    "tp_overlap",
    "dp_overlap",
    # layer_overhead_s: the host model (profile host_* priors, mechanisms-facts §3) replaces it
    "straggler_spread",
)

# Physical bounds and prior widths (one standard deviation) of each coefficient.
BOUNDS: dict[str, tuple[float, float, float]] = {
    "gemm_efficiency": (0.3, 1.0, 0.1),
    "gemm_half_tokens": (4.0, 4096.0, 50.0),
    "gemm_half_width": (0.0, 2048.0, 64.0),
    "gemm_half_time_s": (0.0, 200e-6, 10e-6),
    "fp8_gemm_efficiency": (0.25, 1.0, 0.1),
    "fp8_half_tokens": (4.0, 8192.0, 100.0),
    "fp8_half_width": (0.0, 8192.0, 300.0),
    "fp8_half_time_s": (0.0, 200e-6, 10e-6),
    "attention_efficiency": (0.1, 0.95, 0.15),
    "attention_half_seq": (16.0, 8192.0, 300.0),
    "attention_score_bytes": (0.0, 40.0, 8.0),
    "hbm_efficiency": (0.3, 1.0, 0.15),
    "nvlink_efficiency": (0.2, 1.0, 0.15),
    "network_efficiency": (0.1, 1.0, 0.2),
    "intra_latency_s": (0.0, 1e-3, 10e-6),
    "inter_latency_s": (0.0, 1e-3, 20e-6),
    "tp_overlap": (0.0, 1.0, 0.3),
    "dp_overlap": (0.0, 1.0, 0.3),
    "pp_overlap": (0.0, 1.0, 0.3),
    "ep_overlap": (0.0, 1.0, 0.3),
    "layer_overhead_s": (0.0, 2e-3, 50e-6),
    "step_overhead_s": (0.0, 5.0, 0.1),
    "straggler_spread": (0.0, 0.06, 0.01),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorStats:
    """Absolute percentage error of tokens/s per GPU over n rows."""

    n: int
    median_ape: float
    p90_ape: float

    @staticmethod
    def of(predicted: FloatArray, measured: FloatArray) -> ErrorStats:
        if len(measured) == 0:
            return ErrorStats(n=0, median_ape=math.nan, p90_ape=math.nan)
        ape = np.abs(predicted / measured - 1.0)
        return ErrorStats(
            n=len(measured), median_ape=float(np.median(ape)), p90_ape=float(np.percentile(ape, 90))
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FitReport:
    n_rows: int
    coefficients: tuple[str, ...]
    before: ErrorStats
    after: ErrorStats
    values_before: dict[str, float]
    values_after: dict[str, float]
    success: bool
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepRanking:
    sweep_id: str
    n: int
    spearman: float
    """Spearman's rho between predicted and measured tokens/s (nan when undefined)."""
    top1: bool
    """The measured best row is the model's top pick."""
    top3: bool
    measured_spread: float = 0.0
    """max / min - 1 of the measured tokens/s: below a few % the order is run-to-run noise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CVReport:
    group_by: str
    n_rows: int
    before: ErrorStats
    """Out-of-sample error of the base (prior) profiles."""
    after: ErrorStats
    """Out-of-sample error of profiles fitted without the held-out group."""
    per_group: dict[str, dict[str, float]]
    sweeps: list[SweepRanking]
    predictions: dict[str, dict[str, float]] = field(default_factory=dict)
    """row_id -> measured, before, after (tokens/s per GPU)."""


def usable(measurements: Sequence[Measurement]) -> list[Measurement]:
    """Rows fit for fitting and accuracy: a measured tokens/s and reliability not 'low'."""
    return [
        m for m in measurements if m.tokens_per_s_per_gpu is not None and m.reliability != "low"
    ]


class _Groups:
    """Measurements grouped by (model, cluster, job) so each group is one vectorised call."""

    def __init__(self, measurements: Sequence[Measurement]) -> None:
        index: dict[tuple[Any, ...], list[int]] = {}
        for i, m in enumerate(measurements):
            index.setdefault((m.model, m.cluster, m.job), []).append(i)
        self.n = len(measurements)
        self.items = [
            (
                measurements[ids[0]],
                np.asarray(ids),
                LayoutBatch.from_layouts([measurements[i].layout for i in ids]),
            )
            for ids in index.values()
        ]

    def predict(self, profile: PerformanceProfile) -> FloatArray:
        out = np.empty(self.n)
        for first, ids, batch in self.items:
            est = estimate_performance(first.model, first.cluster, first.job, batch, profile)
            out[ids] = est.tokens_per_s_per_gpu
        return out


def predict_tokens_per_s(
    measurements: Sequence[Measurement], profile: PerformanceProfile
) -> FloatArray:
    """Predicted tokens/s per GPU of each measurement's layout under one profile."""
    return _Groups(measurements).predict(profile)


def fit_profile(
    measurements: Sequence[Measurement],
    base: PerformanceProfile,
    *,
    coefficients: Sequence[str] = DEFAULT_COEFFICIENTS,
    prior_weight: float = 0.15,
) -> tuple[PerformanceProfile, FitReport]:
    """Least squares on log(pred/measured) tokens/s with soft priors toward ``base``.

    ``prior_weight`` is the residual of a coefficient one prior-width away from its base value,
    in units of log error of one row (0.15: as costly as one row 15 % off).
    """
    rows = usable(measurements)
    names = tuple(coefficients)
    for name in names:
        if name not in BOUNDS:
            raise ValueError(f"unknown coefficient {name!r}; fit one of {', '.join(BOUNDS)}")
    measured = np.array([m.tokens_per_s_per_gpu for m in rows], dtype=np.float64)
    x0 = np.array([getattr(base, n) for n in names], dtype=np.float64)
    lo = np.array([BOUNDS[n][0] for n in names])
    hi = np.array([BOUNDS[n][1] for n in names])
    width = np.array([BOUNDS[n][2] for n in names])
    x0 = np.clip(x0, lo, hi)
    groups = _Groups(rows)
    before = groups.predict(base) if rows else np.empty(0)

    def make(x: FloatArray) -> PerformanceProfile:
        return base.with_coefficients(**{n: float(v) for n, v in zip(names, x, strict=True)})

    def residuals(x: FloatArray) -> FloatArray:
        pred = groups.predict(make(x))
        data = np.log(np.maximum(pred, 1e-9) / measured)
        return np.concatenate([data, prior_weight * (x - x0) / width])

    if rows and names:
        result = least_squares(
            residuals, x0, bounds=(lo, hi), x_scale=width, diff_step=1e-3, max_nfev=200
        )
        x, success, message = result.x, bool(result.success), str(result.message)
    else:
        x, success, message = x0, False, "no usable rows or no coefficients"
    fitted = make(x)
    after = groups.predict(fitted) if rows else np.empty(0)
    report = FitReport(
        n_rows=len(rows),
        coefficients=names,
        before=ErrorStats.of(before, measured),
        after=ErrorStats.of(after, measured),
        values_before={n: float(v) for n, v in zip(names, x0, strict=True)},
        values_after={n: float(v) for n, v in zip(names, x, strict=True)},
        success=success,
        message=message,
    )
    provenance = {
        "kind": "fitted",
        "fitted_on": sorted({m.source_id for m in rows}),
        "rows": [m.row_id for m in rows],
        "n_rows": len(rows),
        "coefficients": list(names),
        "median_ape_before": report.before.median_ape,
        "median_ape_after": report.after.median_ape,
        "p90_ape_after": report.after.p90_ape,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "base": base.provenance,
    }
    return replace(fitted, provenance=provenance), report


def _sweep_rankings(rows: Sequence[Measurement], pred: FloatArray) -> list[SweepRanking]:
    by_sweep: dict[str, list[int]] = {}
    for i, m in enumerate(rows):
        if m.sweep_id:
            by_sweep.setdefault(m.sweep_id, []).append(i)
    from scipy.stats import spearmanr  # here: scipy.stats costs ~0.6 s to import, a fit needs it

    out = []
    for sweep, ids in sorted(by_sweep.items()):
        if len(ids) < 3:
            continue
        meas = np.array([rows[i].tokens_per_s_per_gpu for i in ids], dtype=np.float64)
        p = pred[ids]
        rho = (
            float(spearmanr(p, meas).statistic) if np.ptp(p) > 0 and np.ptp(meas) > 0 else math.nan
        )
        best = int(np.argmax(meas))
        order = list(np.argsort(-p))
        out.append(
            SweepRanking(
                sweep_id=sweep,
                n=len(ids),
                spearman=rho,
                top1=bool(order[0] == best),
                top3=bool(best in order[:3]),
                measured_spread=float(meas.max() / meas.min() - 1.0),
            )
        )
    return out


def group_key(m: Measurement, group_by: str) -> str:
    """The held-out group a measurement belongs to under ``group_by`` (one of GROUPINGS)."""
    if group_by == "source":
        return m.source_id
    if group_by == "sweep":
        return m.sweep_id or f"row:{m.row_id}"
    if group_by == "gpu":
        return m.cluster.gpu.name
    if group_by == "stack":
        return stack_key(m)
    if group_by == "cluster":
        c = m.cluster
        net = c.inter_node_bandwidth_bytes_per_s / 1e9
        return f"{c.gpu.name} x{c.gpus_per_node}/node {net:.0f} GB/s"
    return model_family(m.model.name)


def stack_key(m: Measurement) -> str:
    """The software stack a row ran with, as far as the row says: the job's stack settings, the
    Megatron-Core and Transformer Engine releases and the fp8 recipe (None where the row and
    ``models_db/measurement_stacks.csv`` state none: one group per unstated value), CUDA graphs
    and the gradient-reduction dtype."""
    j, lay = m.job, m.layout
    return (
        f"tp_overlap={j.tp_comm_overlap} attn={j.attention_backend} "
        f"ce={j.cross_entropy_fusion} graphs={lay.cuda_graphs} grads={lay.grad_reduce_dtype} "
        f"core={j.megatron_core_version} te={j.te_version} fp8={j.fp8_recipe}"
    )


def _profile_for(
    gpu: GPUSpec,
    train: Sequence[Measurement],
    base_for: Callable[[GPUSpec], PerformanceProfile],
    names_for: Callable[[GPUSpec], Sequence[str]],
    noise: float,
    shared_noise: float,
) -> PerformanceProfile:
    """Fitted on the training rows of this GPU type; with none, transferred from the GPU type
    with the most training rows (planner.calibration.transfer), as an unmeasured GPU is shipped.

    One fit path (issue 12): the identified + regularised fit of user calibration, so a
    coefficient the rows do not identify keeps its prior, and only what the donor's rows
    identified is transferred (the target keeps its own priors for the rest).
    """
    # imported here: planner.calibration.regularised builds on this module
    from planner.calibration.regularised import fit_regularised

    same = [m for m in train if m.cluster.gpu.name == gpu.name]
    if same:
        return fit_regularised(
            same, base_for(gpu), candidates=names_for(gpu), noise=noise, shared_noise=shared_noise
        ).profile
    counts: dict[str, list[Measurement]] = {}
    for m in train:
        counts.setdefault(m.cluster.gpu.name, []).append(m)
    if not counts:
        return base_for(gpu)
    donor_rows = max(counts.values(), key=len)
    donor = donor_rows[0].cluster.gpu
    fit = fit_regularised(
        donor_rows,
        base_for(donor),
        candidates=names_for(donor),
        noise=noise,
        shared_noise=shared_noise,
    )
    identified = [c.name for c in fit.coefficients if c.identified]
    return transfer_profile(fit.profile, donor, gpu, base_for=base_for, only=identified)


def cross_validate(
    measurements: Sequence[Measurement],
    base_for: Callable[[GPUSpec], PerformanceProfile],
    *,
    group_by: str = "source",
    coefficients: Sequence[str] = DEFAULT_COEFFICIENTS,
    coefficients_for: Callable[[GPUSpec], Sequence[str]] | None = None,
    noise: float | None = None,
    shared_noise: float | None = None,
) -> CVReport:
    """Leave-one-group-out: fit each GPU type's profile without the group, predict the group.

    ``group_by`` is one of GROUPINGS. A GPU type left without training rows (always so for
    ``gpu``) gets the profile an unmeasured GPU is shipped with: its priors plus the
    coefficients transferred from the fitted GPU type with the most rows.
    ``coefficients_for`` (optional) chooses the fitted coefficients per GPU type; ``noise``
    and ``shared_noise`` are the within-campaign and shared log noise of the regularised fit
    (defaults: its fit weighting ``FIT_ROW_LOG_SD`` and ``FIT_SHARED_LOG_SD``).
    """
    from planner.calibration.regularised import FIT_ROW_LOG_SD, FIT_SHARED_LOG_SD

    row_noise = FIT_ROW_LOG_SD if noise is None else noise
    shared = FIT_SHARED_LOG_SD if shared_noise is None else shared_noise
    if group_by not in GROUPINGS:
        raise ValueError(f"group_by must be one of {', '.join(GROUPINGS)}")
    rows = usable(measurements)

    def names_for(gpu: GPUSpec) -> Sequence[str]:
        return coefficients if coefficients_for is None else coefficients_for(gpu)

    measured = np.array([m.tokens_per_s_per_gpu for m in rows], dtype=np.float64)
    before = np.empty(len(rows))
    after = np.empty(len(rows))
    per_group: dict[str, dict[str, float]] = {}
    for g in sorted({group_key(m, group_by) for m in rows}):
        held = [i for i, m in enumerate(rows) if group_key(m, group_by) == g]
        train = [m for m in rows if group_key(m, group_by) != g]
        for gpu_name in sorted({rows[i].cluster.gpu.name for i in held}):
            idx = [i for i in held if rows[i].cluster.gpu.name == gpu_name]
            gpu = rows[idx[0]].cluster.gpu
            fitted = _profile_for(gpu, train, base_for, names_for, row_noise, shared)
            subset = [rows[i] for i in idx]
            before[idx] = predict_tokens_per_s(subset, base_for(gpu))
            after[idx] = predict_tokens_per_s(subset, fitted)
        stats = ErrorStats.of(after[held], measured[held])
        per_group[g] = {
            "n": float(len(held)),
            "median_ape": stats.median_ape,
            "p90_ape": stats.p90_ape,
            "median_ape_before": ErrorStats.of(before[held], measured[held]).median_ape,
            "p90_ape_before": ErrorStats.of(before[held], measured[held]).p90_ape,
            "median_ratio": float(np.median(after[held] / measured[held])),
        }
    return CVReport(
        group_by=group_by,
        n_rows=len(rows),
        before=ErrorStats.of(before, measured),
        after=ErrorStats.of(after, measured),
        per_group=per_group,
        sweeps=_sweep_rankings(rows, after),
        predictions={
            m.row_id: {
                "measured": float(measured[i]),
                "before": float(before[i]),
                "after": float(after[i]),
            }
            for i, m in enumerate(rows)
        },
    )
