"""What to measure next: the K short runs on the user's cluster that most reduce the uncertainty
of one plan's prediction (issue 12 item 10).

The plan's log tokens/s depends on the profile's coefficients through g = d log(pred) / dz (z:
coefficients in prior widths, :mod:`planner.calibration.identify`). Before any run its variance is
g' P g, with P the posterior covariance of z: the prior's identity, sharpened by the rows already
measured (P = (I + J'WJ)^-1, Bishop PRML eq. 3.54). A measured run with sensitivity j
removes (g' P j)^2 / (s^2 + j' P j) of it (the rank-one update of P; c-optimal design,
Atkinson & Donev, Optimum Experimental Designs §10.2). Candidates are small variations of the
plan's layout on one to a few nodes (the same model, or a layer-reduced proxy of it as NVIDIA's
benchmarks run, where the full model does not fit: fewer pipeline stages of the same layers per
stage when one replica needs more GPUs than the runs have, :mod:`.suggest_proxy`); the greedy
picks the best K in turn. Where no run fits the cluster or the user's nodes per run, the answer
says why instead of an empty list.

Rows are not independent: a campaign's rows share an error (:mod:`planner.calibration.noise`).
W weighs each measured row as the fit does, 1 / (sigma^2 (1 + (n_g - 1) rho)) (Kish's design
effect over its campaign of n_g rows), and the K suggested runs, one upload from one cluster,
are one campaign of K rows: s^2 = sigma^2 (1 + (K - 1) rho), so K runs of one cluster reduce the
plan's variance less than K independent rows would. sigma_b there is the prior sd of a new
cluster's offset, the same as the calibration's level uses (``level.new_cluster_noise``: tau of
the interval table's transfer block, what the band of an uncalibrated cluster uses). The noise
model is a required argument (callers pass ``models_db.intervals.cluster_level_noise()``), so
that no caller gets another sigma_b than the band's unnoticed (the four shared campaigns' REML
sigma_b, 0.025, understates a new cluster's shift). A larger sigma_b makes the K runs' common
shift less informative (rho 0.82 with tau 0.107 against 0.16): what they share is the cluster's
offset, which the level absorbs, not the coefficients. That offset is itself part of the plan's
uncertainty on a cluster not yet calibrated, and every run on the cluster informs it: the plan's
uncertainty before and after adds the level's error to the coefficients'
(:mod:`planner.calibration.suggest_level`, the band's formula), and each run's share counts both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.calibration import fit as _fit
from planner.calibration.identify import Coordinates, sensitivity
from planner.calibration.measurements import Measurement
from planner.calibration.noise import NoiseModel, campaign_index, campaign_key
from planner.calibration.regularised import default_candidates
from planner.calibration.suggest_level import (
    PlanUncertainty,
    level_before,
    level_log_sd,
    run_shares,
)
from planner.calibration.suggest_proxy import (
    SHORT_RUN_NODES,
    fit_stages,
    no_run_reason,
    node_counts,
    replica_note,
)
from planner.layouts import FloatArray, LayoutBatch
from planner.megatron.flags import launch_spec
from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.performance.profile import PerformanceProfile
from planner.performance.step_time import estimate_performance
from planner.space.rules import check_rules
from planner.specs import ClusterSpec, Layout, ModelSpec, SpecError, TrainingJob

RUN_ITERATIONS = 50
"""Iterations of a suggested run: Megatron's first iterations include warm-up and compilation;
50 leave 40+ steady ones for a median step time at the default --log-interval (10)."""
MAX_NODES = max(SHORT_RUN_NODES)
"""Largest of the short runs every plan tries (a larger replica adds its own fewest nodes)."""
STARTUP_S = 300.0
"""Start-up budget per run (process launch, NCCL init, data index build) [assumption: a few
minutes on a warm cluster]."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SuggestedRun:
    model: ModelSpec
    cluster: ClusterSpec
    job: TrainingJob
    layout: Layout
    step_time_s: float
    tokens_per_s_per_gpu: float
    minutes: float
    """Wall time of the run: start-up plus RUN_ITERATIONS steps."""
    variance_reduction: float
    """Share of the plan's prediction variance (in log tokens/s, the coefficients' and the
    cluster level's) this run removes."""
    informs: tuple[str, ...]
    """Coefficients this run pins down that the plan's prediction depends on."""
    change: str
    """How it differs from the plan, in words."""
    command: str
    args: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "change": self.change,
            "model": self.model.name,
            "num_layers": self.model.num_layers,
            "num_gpus": self.cluster.num_gpus,
            "nodes": self.cluster.num_nodes,
            "global_batch_size": self.job.global_batch_size,
            "layout": self.layout.to_dict(),
            "step_time_s": self.step_time_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "iterations": RUN_ITERATIONS,
            "minutes": round(self.minutes, 1),
            "variance_reduction": round(self.variance_reduction, 4),
            "informs": list(self.informs),
            "command": self.command,
            "args": list(self.args),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestions:
    runs: tuple[SuggestedRun, ...]
    before: PlanUncertainty
    """The plan's uncertainty (coefficients and the cluster's level) before the runs."""
    after: PlanUncertainty
    """The same once the suggested runs are measured (as predicted by the design)."""
    candidates: int
    sensitive_to: tuple[str, ...]
    """Coefficients the plan's prediction depends on, most first."""
    note: str | None = None
    """Why no run was proposed, or what the runs stand in for (a replica larger than them)."""

    @property
    def plan_sd_before(self) -> float:
        """sd of the plan's log tokens/s before the runs: coefficients and level."""
        return self.before.log_sd

    @property
    def plan_sd_after(self) -> float:
        return self.after.log_sd

    def to_dict(self) -> dict[str, object]:
        return {
            "runs": [r.to_dict() for r in self.runs],
            "note": self.note,
            "plan_uncertainty_pct_before": round(100 * float(np.expm1(self.plan_sd_before)), 2),
            "plan_uncertainty_pct_after": round(100 * float(np.expm1(self.plan_sd_after)), 2),
            "uncertainty_before": self.before.to_dict(),
            "uncertainty_after": self.after.to_dict(),
            "candidates_considered": self.candidates,
            "sensitive_to": list(self.sensitive_to),
        }


def unmeasured_row(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout
) -> Measurement:
    """A row to predict, its measured value a placeholder 1.0 (the sensitivity only needs the
    prediction; tests set the value they measure)."""
    return Measurement(
        row_id="candidate",
        source_id="suggest",
        sweep_id="",
        reliability="high",
        model=model,
        cluster=cluster,
        job=job,
        layout=layout,
        tokens_per_s_per_gpu=1.0,
        step_time_s=None,
        mfu=None,
    )


def _variants(layout: Layout, model: ModelSpec) -> Iterator[tuple[str, Layout]]:
    yield "same layout", layout
    for tp in (layout.tp // 2, layout.tp * 2):
        if tp >= 1 and tp != layout.tp:
            yield f"tp {layout.tp} -> {tp}", replace(layout, tp=tp)
    if layout.cp > 1:
        yield f"cp {layout.cp} -> 1", replace(layout, cp=1)
    for mbs in (layout.micro_batch_size * 2, layout.micro_batch_size // 2):
        if mbs >= 1:
            yield (
                f"micro-batch {layout.micro_batch_size} -> {mbs}",
                replace(layout, micro_batch_size=mbs),
            )
    if layout.vpp > 1:
        yield "no interleaving (vpp 1)", replace(layout, vpp=1)
    if layout.pp > 1:
        yield f"pp {layout.pp} -> {layout.pp // 2}", replace(layout, pp=layout.pp // 2, vpp=1)
    if model.is_moe and layout.ep > 1:
        yield f"ep {layout.ep} -> {layout.ep // 2}", replace(layout, ep=layout.ep // 2)


def _feasible(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout, threshold: float
) -> bool:
    batch = LayoutBatch.from_layouts([layout])
    try:
        if check_rules(model, cluster, job, batch).any():
            return False
        mem = estimate_memory(model, cluster, job, batch, MemoryOptions(threshold=threshold))
    except (SpecError, ValueError, ZeroDivisionError):
        return False
    return bool(mem.fits[0])


def candidate_runs(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    layout: Layout,
    *,
    threshold: float = 0.8,
    max_nodes: int | None = None,
) -> list[tuple[str, ModelSpec, ClusterSpec, TrainingJob, Layout]]:
    """Short runs near the plan on a few nodes of the same cluster (at most ``max_nodes``),
    feasible in memory: the plan's model where a replica fits, else a proxy with fewer stages
    (:mod:`planner.calibration.suggest_proxy`), then fewer layers per stage."""
    per_rank_batch = max(1, job.global_batch_size // max(1, layout.dp))
    out = []
    seen = set()
    for change, lay in _variants(layout, model):
        for nodes in node_counts(cluster, lay, max_nodes):
            # a cluster of less than one node (num_gpus < gpus_per_node) runs on what it has
            gpus = min(nodes * cluster.gpus_per_node, cluster.num_gpus)
            fit = fit_stages(model, lay, gpus)
            if fit is None:
                continue
            dp = gpus // (fit.layout.tp * fit.layout.pp * fit.layout.cp)
            try:
                sized = replace(fit.layout, dp=dp)
                small = replace(cluster, num_gpus=gpus)
                small_job = replace(job, global_batch_size=per_rank_batch * dp)
            except SpecError:
                continue
            for proxy in _models(fit.model, sized, name=model.name):
                key = (proxy.num_layers, gpus, sized)
                if key in seen:
                    continue
                if _feasible(proxy, small, small_job, sized, threshold):
                    seen.add(key)
                    what = _describe(change, fit.change, layout, proxy, model, sized)
                    out.append(
                        (
                            f"{what} on {nodes} node{'' if nodes == 1 else 's'}",
                            proxy,
                            small,
                            small_job,
                            sized,
                        )
                    )
                    break
    return out


def _describe(
    change: str, stages: str, plan: Layout, proxy: ModelSpec, model: ModelSpec, run: Layout
) -> str:
    """The run's difference from the plan in words: the variant, the proxy's stages (one
    'pp a -> b' where the variant already changed pp) and its layers."""
    if stages and change.startswith("pp "):
        change, stages = f"pp {plan.pp} -> {run.pp}", ""
    what = ", ".join(x for x in (change, stages) if x)
    if proxy.num_layers != model.num_layers:
        what += f", {proxy.num_layers} layers"
        if run.pp > 1:
            what += f" ({proxy.num_layers // run.pp} per stage)"
    return what


def _models(model: ModelSpec, layout: Layout, *, name: str) -> Iterator[ModelSpec]:
    """The model, then layer-reduced proxies (a multiple of pp x vpp layers), largest first,
    named after the plan's model ``name``."""
    yield model
    step = layout.pp * layout.vpp
    for share in (2, 4, 8):
        layers = (model.num_layers // share) // step * step
        if step <= layers < model.num_layers:
            try:
                yield replace(model, num_layers=layers, name=f"{name} ({layers} layers)")
            except SpecError:  # e.g. a layer pattern that names more layers
                return


def suggest_runs(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    layout: Layout,
    profile: PerformanceProfile,
    *,
    k: int,
    noise: NoiseModel,
    measured: Sequence[Measurement] = (),
    threshold: float = 0.8,
    max_nodes: int | None = None,
) -> Suggestions:
    """The ``k`` runs that most reduce the plan's prediction variance, best first. ``noise``:
    the campaign noise model, sigma_b the prior sd of the cluster's offset (the level's and the
    band's tau: ``models_db.intervals.cluster_level_noise()``), sigma_w a row's own error;
    ``measured``: rows already measured on this cluster; ``max_nodes``: the most nodes one run
    may use (None: the cluster's)."""
    if k < 1:
        raise ValueError(f"k={k} must be at least 1")
    if max_nodes is not None and max_nodes < 1:
        raise ValueError(f"max_nodes={max_nodes} must be at least 1")
    coords = Coordinates(profile, default_candidates())
    _, g_row = sensitivity(_fit._Groups([unmeasured_row(model, cluster, job, layout)]), coords)
    g = g_row[0]
    precision = np.eye(len(coords.names))
    rows = _fit.usable(measured)
    if rows:
        _, jm = sensitivity(_fit._Groups(rows), coords)
        groups = campaign_index([campaign_key(m) for m in rows])
        white = noise.whiten(jm, groups)
        precision += white.T @ white
    cov = np.linalg.inv(precision)
    var_before = float(g @ cov @ g)
    level = level_before(len(rows), noise, profile.provenance.get("cluster_level"))
    before = PlanUncertainty(
        coefficient_log_sd=float(np.sqrt(var_before)), level_log_sd=level[1], level_rows=level[0]
    )
    cands = candidate_runs(model, cluster, job, layout, threshold=threshold, max_nodes=max_nodes)
    if not cands:
        return Suggestions(
            runs=(),
            before=before,
            after=before,
            candidates=0,
            sensitive_to=_top(coords.names, g),
            note=no_run_reason(model, cluster, layout, max_nodes),
        )
    # the suggested runs: one campaign of min(k, candidates) rows (noise.NoiseModel.weights)
    run_var = 1.0 / float(noise.weights(np.zeros(min(k, len(cands)), dtype=np.intp))[0])
    pseudo = [unmeasured_row(*c[1:]) for c in cands]
    pred, jac = sensitivity(_fit._Groups(pseudo), coords)
    picked: list[tuple[int, float]] = []
    for _ in range(min(k, len(cands))):
        taken = {i for i, _ in picked}
        gains = [
            -1.0 if i in taken else float((g @ cov @ j) ** 2 / (run_var + j @ cov @ j))
            for i, j in enumerate(jac)
        ]
        # the largest reduction, to 1 % of the plan's variance; then the fewest GPUs
        best = max(
            range(len(cands)),
            key=lambda i: (round(gains[i] / max(var_before, 1e-30), 2), -cands[i][2].num_gpus),
        )
        # a run that teaches the coefficients nothing still informs the cluster's level
        if gains[best] <= 1e-9 * max(var_before, 1e-30) and noise.shared_log_sd == 0:
            break
        picked.append((best, max(gains[best], 0.0)))
        cj = cov @ jac[best]
        cov = cov - np.outer(cj, cj) / (run_var + jac[best] @ cj)
    shares = run_shares([gain for _, gain in picked], level, noise, before.variance)
    chosen = [
        _run(cands[i], float(pred[i]), share, coords, g, jac[i])
        for (i, _), share in zip(picked, shares, strict=True)
    ]
    var_after = float(g @ cov @ g)
    after_rows = level[0] + len(chosen)
    after = PlanUncertainty(
        coefficient_log_sd=float(np.sqrt(max(var_after, 0.0))),
        level_log_sd=level_log_sd(after_rows, noise) if chosen else level[1],
        level_rows=after_rows,
    )
    return Suggestions(
        runs=tuple(chosen),
        before=before,
        after=after,
        candidates=len(cands),
        sensitive_to=_top(coords.names, g),
        note=_note(model, cluster, layout, max_nodes, [c[4] for c in cands]),
    )


def _note(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    max_nodes: int | None,
    layouts: Sequence[Layout],
) -> str | None:
    """What the runs stand in for; or, where none keeps the plan's tp, cp and ep groups (its
    proxy needs more nodes than the cluster or the budget), why."""
    if not any((x.tp, x.cp, x.ep) == (layout.tp, layout.cp, layout.ep) for x in layouts):
        why = no_run_reason(model, cluster, layout, max_nodes)
        return f"{why}; the runs proposed change tp, cp or ep, so they miss the plan's own groups"
    return replica_note(cluster, layout)


def _top(names: Sequence[str], weights: FloatArray, n: int = 4) -> tuple[str, ...]:
    order = np.argsort(-np.abs(weights))
    return tuple(names[i] for i in order[:n] if abs(weights[i]) > 1e-6)


def _run(
    cand: tuple[str, ModelSpec, ClusterSpec, TrainingJob, Layout],
    tokens_per_s: float,
    share: float,
    coords: Coordinates,
    g: FloatArray,
    j: FloatArray,
) -> SuggestedRun:
    change, model, cluster, job, layout = cand
    est = estimate_performance(
        model, cluster, job, LayoutBatch.from_layouts([layout]), coords.prior
    )
    step = float(est.step_time_s[0])
    launch = launch_spec(model, cluster, job, layout)
    args = (*launch.args, "--train-iters", str(RUN_ITERATIONS))
    return SuggestedRun(
        model=model,
        cluster=cluster,
        job=job,
        layout=layout,
        step_time_s=step,
        tokens_per_s_per_gpu=tokens_per_s,
        minutes=(STARTUP_S + RUN_ITERATIONS * step) / 60.0,
        variance_reduction=share,
        informs=_top(coords.names, g * j, n=3),
        change=change,
        command=f"{launch.command} --train-iters {RUN_ITERATIONS}",
        args=args,
    )
