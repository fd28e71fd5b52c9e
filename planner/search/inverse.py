"""Inverse questions: the longest sequence, the largest micro-batch, the fewest GPUs that fit.

Each question fixes the model, the cluster (or the GPU type) and the settings, and searches one
value: a sequence length in steps of ``granularity`` tokens, a micro-batch size, or a GPU count
in whole nodes. A value is feasible when at least one layout passes every Megatron rule and the
80 % memory rule (the same checks :func:`planner.search.planning.plan` applies). Memory grows
with the sequence length and the micro-batch, so the longest and largest are found by doubling
and then bisection; the GPU count by walking up node counts. The answer carries the best plans
at the value reached, each stating it (``"seq_length": 5120`` in its JSON).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.performance.profile import PerformanceProfile
from planner.search.planning import Plan, SearchBudget, plan
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.rules import check_rules
from planner.specs import ClusterSpec, ModelSpec, SpecError, TrainingJob

__all__ = [
    "InverseAnswer",
    "fewest_gpus",
    "largest_micro_batch",
    "longest_sequence",
]

Question = Literal["seq_length", "micro_batch_size", "num_gpus"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InverseAnswer:
    """The value reached and the best plans there (empty when nothing fits at all)."""

    question: Question
    """Which value was searched."""
    value: int | None
    """The longest / largest / fewest value that fits; None when none does."""
    plans: list[Plan]
    probes: tuple[tuple[int, int], ...]
    """(value tried, feasible layouts found) in the order tried."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "value": self.value,
            "probes": [list(p) for p in self.probes],
            "plans": [{**p.to_dict(), self.question: self.value} for p in self.plans],
        }


def feasible_layouts(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    constraints: SearchConstraints | None,
    threshold: float,
) -> int:
    """Layouts that pass every rule and fit under ``threshold`` x HBM (and in host memory)."""
    batch = enumerate_layouts(model, cluster, job, constraints)
    valid = ~check_rules(model, cluster, job, batch).any(axis=1)
    if not valid.any():
        return 0
    mem = estimate_memory(
        model, cluster, job, batch.take(np.flatnonzero(valid)), MemoryOptions(threshold=threshold)
    )
    return int(mem.fits.sum())


def _largest(
    feasible: Callable[[int], int], low: int, high: int
) -> tuple[int | None, list[tuple[int, int]]]:
    """Largest k in [low, high] with feasible(k) > 0, assuming feasibility shrinks with k."""
    probes: list[tuple[int, int]] = []

    def check(k: int) -> bool:
        count = feasible(k)
        probes.append((k, count))
        return count > 0

    if not check(low):
        return None, probes
    good, bad = low, None
    k = low
    while bad is None:  # double until something does not fit
        k = min(2 * k, high)
        if check(k):
            good = k
            if k == high:
                return good, probes
        else:
            bad = k
    while bad - good > 1:
        mid = (good + bad) // 2
        if check(mid):
            good = mid
        else:
            bad = mid
    return good, probes


def _answer(
    question: Question,
    value: int | None,
    probes: list[tuple[int, int]],
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    constraints: SearchConstraints | None,
    profile: PerformanceProfile,
    threshold: float,
    top_k: int,
    budget: SearchBudget | None,
) -> InverseAnswer:
    plans: list[Plan] = []
    if value is not None:
        result = plan(
            model, cluster, job, constraints=constraints, profile=profile,
            threshold=threshold, top_k=top_k, budget=budget,
        )  # fmt: skip
        plans = result.plans
    return InverseAnswer(question=question, value=value, plans=plans, probes=tuple(probes))


def longest_sequence(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    *,
    profile: PerformanceProfile,
    constraints: SearchConstraints | None = None,
    threshold: float = 0.8,
    granularity: int = 128,
    max_seq_length: int | None = None,
    top_k: int = 10,
    budget: SearchBudget | None = None,
) -> InverseAnswer:
    """The longest ``seq_length`` (a multiple of ``granularity``) at which some layout fits."""
    if granularity < 1:
        raise SpecError("granularity must be >= 1 token", field="granularity")
    limit = max_seq_length or model.max_position_embeddings or 1 << 20
    high = max(limit // granularity, 1)

    def feasible(k: int) -> int:
        trial = replace(job, seq_length=k * granularity)
        return feasible_layouts(model, cluster, trial, constraints, threshold)

    k, probes = _largest(feasible, 1, high)
    value = None if k is None else k * granularity
    scaled = [(p * granularity, n) for p, n in probes]
    final = job if value is None else replace(job, seq_length=value)
    return _answer("seq_length", value, scaled, model, cluster, final, constraints, profile,
                   threshold, top_k, budget)  # fmt: skip


def largest_micro_batch(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    *,
    profile: PerformanceProfile,
    constraints: SearchConstraints | None = None,
    threshold: float = 0.8,
    top_k: int = 10,
    budget: SearchBudget | None = None,
) -> InverseAnswer:
    """The largest micro-batch size (dividing the global batch per replica) that fits."""
    base = constraints or SearchConstraints()

    def feasible(b: int) -> int:
        if job.global_batch_size % b:
            return 0
        fixed = replace(base, micro_batch_size=b)
        return feasible_layouts(model, cluster, job, fixed, threshold)

    candidates = [b for b in range(1, job.global_batch_size + 1) if job.global_batch_size % b == 0]
    probes: list[tuple[int, int]] = []
    value = None
    lo, hi = 0, len(candidates) - 1
    while lo <= hi:  # bisection over the divisors: memory grows with b
        mid = (lo + hi) // 2
        count = feasible(candidates[mid])
        probes.append((candidates[mid], count))
        if count:
            value, lo = candidates[mid], mid + 1
        else:
            hi = mid - 1
    fixed = base if value is None else replace(base, micro_batch_size=value)
    return _answer("micro_batch_size", value, probes, model, cluster, job, fixed, profile,
                   threshold, top_k, budget)  # fmt: skip


def fewest_gpus(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    *,
    profile: PerformanceProfile,
    constraints: SearchConstraints | None = None,
    threshold: float = 0.8,
    max_gpus: int | None = None,
    top_k: int = 10,
    budget: SearchBudget | None = None,
) -> InverseAnswer:
    """The fewest GPUs of the cluster's type (1, 2, 4, ... within a node, then whole nodes) on
    which some layout fits; ``max_gpus`` defaults to the cluster's size."""
    limit = max_gpus or cluster.num_gpus
    per_node = cluster.gpus_per_node
    sizes = [n for n in (1, 2, 4, 8, 16, 32, 64) if n < per_node] + list(
        range(per_node, limit + 1, per_node)
    )
    probes: list[tuple[int, int]] = []
    value = None
    for n in sizes:
        count = feasible_layouts(model, replace(cluster, num_gpus=n), job, constraints, threshold)
        probes.append((n, count))
        if count:
            value = n
            break
    sized = cluster if value is None else replace(cluster, num_gpus=value)
    return _answer("num_gpus", value, probes, model, sized, job, constraints, profile,
                   threshold, top_k, budget)  # fmt: skip
