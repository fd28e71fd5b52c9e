"""Scenarios and screening: which layouts of which cluster x job pass the rules and fit.

A *scenario* is one cluster and one job; ranges of GPU counts and global batch sizes give
several. Each scenario is enumerated and screened in one vectorised pass (rules on every
layout, memory on the rule-valid ones), and the survivors of all scenarios form one
:class:`~planner.search.sampling.CandidatePool` with a histogram of why the others were rejected.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.layouts import IntArray, LayoutBatch
from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.search.cp_choice import choose_cp_comm
from planner.search.objectives import FloatArray
from planner.search.sampling import CandidatePool
from planner.space.enumeration import SearchConstraints, enumerate_layouts, rejection_histogram
from planner.space.rules import check_rules
from planner.specs import ClusterSpec, ModelSpec, SpecError, TrainingJob


def memory_reason(threshold: float) -> str:
    """The histogram key for layouts that pass every rule but do not fit."""
    return f"needs more than {threshold * 100:g} % of GPU memory"


@dataclass(frozen=True, slots=True)
class Scenario:
    cluster: ClusterSpec
    job: TrainingJob


def scenarios_of(
    cluster_or_clusters: ClusterSpec | Sequence[ClusterSpec],
    job_or_jobs: TrainingJob | Sequence[TrainingJob],
    num_gpus_options: Sequence[int] | None,
    global_batch_size_options: Sequence[int] | None,
) -> tuple[list[ClusterSpec], list[TrainingJob]]:
    clusters = (
        [cluster_or_clusters]
        if isinstance(cluster_or_clusters, ClusterSpec)
        else list(cluster_or_clusters)
    )
    jobs = [job_or_jobs] if isinstance(job_or_jobs, TrainingJob) else list(job_or_jobs)
    if not clusters or not jobs:
        raise SpecError("plan needs at least one cluster and one job", field="num_gpus")
    if num_gpus_options:
        try:
            clusters = [
                dataclasses.replace(c, num_gpus=int(n))
                for c in clusters
                for n in sorted(set(num_gpus_options))
            ]
        except SpecError as exc:
            raise SpecError(exc.message, field="num_gpus_options") from exc
    if global_batch_size_options:
        try:
            jobs = [
                dataclasses.replace(j, global_batch_size=int(b))
                for j in jobs
                for b in sorted(set(global_batch_size_options))
            ]
        except SpecError as exc:
            raise SpecError(exc.message, field="global_batch_size_options") from exc
    return list(dict.fromkeys(clusters)), list(dict.fromkeys(jobs))


def screen(
    model: ModelSpec,
    scenarios: list[Scenario],
    constraints: SearchConstraints,
    threshold: float,
) -> tuple[CandidatePool, dict[str, int], dict[str, int], dict[str, float]]:
    """Enumerate every scenario and keep the layouts that pass the rules and fit in memory."""
    timings = {"enumerate_s": 0.0, "rules_s": 0.0, "memory_s": 0.0}
    rejections: dict[str, int] = {}
    counts = {"enumerated": 0, "valid": 0, "feasible": 0}
    parts: list[LayoutBatch] = []
    scen: list[IntArray] = []
    headroom: list[FloatArray] = []
    options = MemoryOptions(threshold=threshold)
    for s, sc in enumerate(scenarios):
        t0 = time.perf_counter()
        batch = enumerate_layouts(model, sc.cluster, sc.job, constraints)
        t1 = time.perf_counter()
        violated = check_rules(model, sc.cluster, sc.job, batch)
        valid = np.flatnonzero(~violated.any(axis=1))
        for reason, n in rejection_histogram(model, sc.cluster, sc.job, batch, violated).items():
            rejections[reason] = rejections.get(reason, 0) + n
        t2 = time.perf_counter()
        counts["enumerated"] += len(batch)
        counts["valid"] += len(valid)
        if len(valid):
            ok = batch.take(valid)
            mem = estimate_memory(model, sc.cluster, sc.job, ok, options)
            fits = np.asarray(mem.fits, dtype=np.bool_)
            misfits = int((~fits).sum())
            if misfits:
                key = memory_reason(threshold)
                rejections[key] = rejections.get(key, 0) + misfits
            if fits.any():
                # open --cp-comm-type: the fastest valid type per layout (planner.search.cp_choice)
                parts.append(choose_cp_comm(model, sc.cluster, sc.job, ok.take(fits), options))
                scen.append(np.full(int(fits.sum()), s, dtype=np.int64))
                limit = threshold * float(mem.capacity_bytes)
                headroom.append(limit - np.asarray(mem.total_bytes, dtype=np.float64)[fits])
        t3 = time.perf_counter()
        timings["enumerate_s"] += t1 - t0
        timings["rules_s"] += t2 - t1
        timings["memory_s"] += t3 - t2
    rejections = dict(sorted(rejections.items(), key=lambda kv: (-kv[1], kv[0])))
    if parts:
        batch_all = LayoutBatch.concat(parts)
        scenario = np.concatenate(scen)
        head = np.concatenate(headroom)
    else:
        batch_all = LayoutBatch.from_columns(tp=np.zeros(0, dtype=np.int64))
        scenario = np.zeros(0, dtype=np.int64)
        head = np.zeros(0, dtype=np.float64)
    gpus = np.array([sc.cluster.num_gpus for sc in scenarios], dtype=np.int64)
    gbs = np.array([sc.job.global_batch_size for sc in scenarios], dtype=np.int64)
    pool = CandidatePool(
        batch=batch_all,
        scenario=scenario,
        num_gpus=gpus[scenario],
        global_batch_size=gbs[scenario],
        headroom_bytes=head,
        tokens_per_s_per_gpu=np.full(len(batch_all), np.nan),
    )
    counts["feasible"] = len(pool)
    return pool, rejections, counts, timings


def scenario_axes(
    pool: CandidatePool, clusters: list[ClusterSpec], jobs: list[TrainingJob]
) -> dict[str, IntArray]:
    """Optuna parameters for the cluster and job choice, named by what the user varied."""
    ci, ji = pool.scenario // len(jobs), pool.scenario % len(jobs)
    axes: dict[str, IntArray] = {}
    if len(clusters) > 1:
        distinct = len({c.num_gpus for c in clusters}) == len(clusters)
        axes["num_gpus" if distinct else "cluster"] = pool.num_gpus if distinct else ci
    if len(jobs) > 1:
        distinct = len({j.global_batch_size for j in jobs}) == len(jobs)
        axes["global_batch_size" if distinct else "job"] = (
            pool.global_batch_size if distinct else ji
        )
    return axes
