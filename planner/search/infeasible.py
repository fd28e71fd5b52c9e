"""When nothing fits: the fewest GPUs that would, the smallest changes that would, the nearest
layouts and how far over the memory limit each is, and a fix per rejection rule.

Every suggestion is checked with the same test the search applies (at least one layout passes
every Megatron rule and the memory rule: :func:`planner.search.inverse.feasible_layouts`), so a
suggested GPU count or change really plans. The probes are bounded (a doubling then a bisection
over whole nodes for the GPU count, one probe per single change, a bisection for the sequence
length, and a wall-clock budget over all of them), so a hopeless job is answered in seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.performance.step_time import PerformanceProfile, estimate_performance
from planner.search.fixes import fix_for
from planner.search.inverse import _largest, feasible_layouts
from planner.search.screening import memory_reason
from planner.space import comm_flags
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.rules import check_rules
from planner.specs import ClusterSpec, ModelSpec, TrainingJob

__all__ = ["Change", "InfeasibleAnswer", "NearLayout", "RuleFix", "explain_infeasible"]

logger = logging.getLogger(__name__)

MAX_GPU_FACTOR = 64
"""The GPU count is searched up to 64x the requested one (doubling: at most six probes)."""
SHORT_NAMES = {
    "recompute": "full recompute",
    "optimizer_sharding": "full sharding",
    "optimizer_offload": "optimizer offload",
}
SEQ_GRANULARITY = 128
"""Shorter sequences are tried in steps of 128 tokens (Megatron's usual padding multiple)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One change to the request that makes at least one layout fit."""

    kind: str
    """num_gpus | recompute | optimizer_sharding | optimizer_offload | seq_length | combined."""
    description: str
    """The change in words ("use 128 GPUs (16 nodes)")."""
    request: dict[str, Any]
    """The request fields to set (plan-request / SearchConstraints names) to plan it."""
    feasible_layouts: int
    """Layouts that fit once the change is made."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NearLayout:
    """A layout that passes every rule but does not fit, with how far over the limit it is."""

    layout: dict[str, Any]
    total_bytes: float
    limit_bytes: float
    over_bytes: float
    """total_bytes - limit_bytes (0 when only host memory is short)."""
    over_fraction: float
    """over_bytes / limit_bytes (0.12: 12 % over the limit)."""
    tokens_per_s_per_gpu: float | None
    """Its predicted speed, were it to fit (for the chart's hollow points)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleFix:
    reason: str
    count: int
    fix: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InfeasibleAnswer:
    """What would make an infeasible job plan."""

    num_gpus: int
    """The GPU count asked for."""
    fewest_gpus: int | None
    """The fewest GPUs (of the probed counts) on which some layout fits; None when none up to
    ``max_gpus_tried`` does."""
    max_gpus_tried: int
    gpu_probes: tuple[tuple[int, int], ...]
    """(GPU count, layouts that fit) in the order tried."""
    changes: tuple[Change, ...]
    nearest: tuple[NearLayout, ...]
    fixes: tuple[RuleFix, ...]
    moe: bool
    """Whether the model has experts (a dense model's layouts show no EP)."""
    elapsed_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_gpus": self.num_gpus,
            "fewest_gpus": self.fewest_gpus,
            "max_gpus_tried": self.max_gpus_tried,
            "gpu_probes": [list(p) for p in self.gpu_probes],
            "changes": [
                {
                    "kind": c.kind,
                    "description": c.description,
                    "request": dict(c.request),
                    "feasible_layouts": c.feasible_layouts,
                }
                for c in self.changes
            ],
            "nearest": [
                {
                    "layout": n.layout,
                    "total_bytes": n.total_bytes,
                    "limit_bytes": n.limit_bytes,
                    "over_bytes": n.over_bytes,
                    "over_fraction": n.over_fraction,
                    "tokens_per_s_per_gpu": n.tokens_per_s_per_gpu,
                    "fits": False,
                }
                for n in self.nearest
            ],
            "fixes": [{"reason": f.reason, "count": f.count, "fix": f.fix} for f in self.fixes],
            "moe": self.moe,
            "elapsed_s": self.elapsed_s,
        }


def explain_infeasible(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    *,
    rejections: Mapping[str, int],
    profile: PerformanceProfile,
    constraints: SearchConstraints | None = None,
    threshold: float = 0.8,
    nearest: int = 5,
    time_limit_s: float = 5.0,
) -> InfeasibleAnswer:
    """What would make ``job`` fit on ``cluster``: probes bounded by ``time_limit_s``."""
    start = time.perf_counter()
    deadline = start + time_limit_s
    base = constraints or SearchConstraints()

    def fits(c: ClusterSpec, j: TrainingJob, k: SearchConstraints) -> int:
        return feasible_layouts(model, c, j, k, threshold)

    fewest, probes, ceiling = _fewest_gpus(
        cluster, lambda n: fits(replace(cluster, num_gpus=n), job, base), deadline
    )
    changes: list[Change] = []
    if fewest is not None:
        nodes = fewest // cluster.gpus_per_node
        where = f" ({nodes} nodes of {cluster.gpus_per_node})" if nodes > 1 else ""
        changes.append(
            Change(
                kind="num_gpus",
                description=f"use {fewest} GPUs{where}",
                request={"num_gpus": fewest},
                feasible_layouts=dict(probes)[fewest],
            )
        )
    for change in _setting_changes(base):
        if time.perf_counter() > deadline:
            break
        kind, words, request, constrained = change
        count = fits(cluster, job, constrained)
        if count:
            changes.append(
                Change(kind=kind, description=words, request=request, feasible_layouts=count)
            )
    if time.perf_counter() < deadline:
        shorter = _shorter_sequence(job, lambda j: fits(cluster, j, base))
        if shorter is not None:
            changes.append(shorter)
    return InfeasibleAnswer(
        num_gpus=cluster.num_gpus,
        fewest_gpus=fewest,
        max_gpus_tried=ceiling,
        gpu_probes=tuple(probes),
        changes=tuple(changes),
        nearest=_nearest(model, cluster, job, base, profile, threshold, nearest),
        fixes=tuple(
            RuleFix(reason=r, count=int(n), fix=fix_for(r, memory_reason(threshold)))
            for r, n in sorted(rejections.items(), key=lambda kv: -kv[1])
        ),
        moe=bool(model.num_experts),
        elapsed_s=time.perf_counter() - start,
    )


def _fewest_gpus(
    cluster: ClusterSpec, count: Callable[[int], int], deadline: float
) -> tuple[int | None, list[tuple[int, int]], int]:
    """Double the GPU count until a layout fits, then bisect over whole nodes between the last
    count that did not fit and the first that did (memory per GPU shrinks with more GPUs)."""
    per_node = cluster.gpus_per_node
    ceiling = cluster.num_gpus * MAX_GPU_FACTOR
    probes: list[tuple[int, int]] = []

    def probe(n: int) -> int:
        found = count(n)
        probes.append((n, found))
        return found

    low, n, high = cluster.num_gpus, cluster.num_gpus, None
    while high is None and time.perf_counter() < deadline:
        n = 2 * n if n < per_node else per_node * -(-2 * n // per_node)  # whole nodes past one
        if n > ceiling:
            break
        if probe(n):
            high = n
        else:
            low = n
    if high is None:
        return None, probes, min(n, ceiling)
    lo_nodes, hi_nodes = low // per_node, high // per_node
    while hi_nodes - lo_nodes > 1 and low >= per_node and time.perf_counter() < deadline:
        mid = (lo_nodes + hi_nodes) // 2
        if probe(mid * per_node):
            hi_nodes = mid
        else:
            lo_nodes = mid
    best = min(n for n, found in probes if found)
    return best, probes, ceiling


def _setting_changes(
    base: SearchConstraints,
) -> list[tuple[str, str, dict[str, Any], SearchConstraints]]:
    """Single changes of the memory-saving settings the search was not already allowed, then
    all of them together: (kind, words, request fields, constraints)."""
    out: list[tuple[str, str, dict[str, Any], SearchConstraints]] = []
    combined = base
    fields: dict[str, Any] = {}
    request: dict[str, Any]
    if "full" not in base.recompute:
        request = {"recompute": ["full"]}
        constrained = replace(base, recompute=("full",))
        out.append(("recompute", "recompute every layer (full recompute)", request, constrained))
        combined, fields = replace(combined, recompute=("full",)), fields | request
    if "full" not in base.optimizer_sharding:
        sharding = (*base.optimizer_sharding, "full")
        request = {"optimizer_sharding": list(sharding)}
        constrained = replace(base, optimizer_sharding=sharding)
        out.append(
            (
                "optimizer_sharding",
                "shard parameters, gradients and optimizer state (full sharding, FSDP)",
                request,
                constrained,
            )
        )
        combined, fields = replace(combined, optimizer_sharding=sharding), fields | request
    if max(base.memory.optimizer_offload_fraction) < 1.0:
        memory = replace(base.memory, optimizer_offload_fraction=(1.0,))
        sharding = tuple(s for s in base.optimizer_sharding if s != "none") or ("optimizer",)
        request = {
            "optimizer_offload_fraction": [1.0],
            "optimizer_sharding": list(sharding),
        }
        constrained = replace(base, memory=memory, optimizer_sharding=sharding)
        out.append(
            (
                "optimizer_offload",
                "offload the optimizer state to host memory (--optimizer-cpu-offload)",
                request,
                constrained,
            )
        )
        both = tuple(dict.fromkeys((*combined.optimizer_sharding, *sharding)))
        combined = replace(combined, memory=memory, optimizer_sharding=both)
        fields = fields | request | {"optimizer_sharding": list(both)}
    if len(out) > 1:
        out.append(
            (
                "combined",
                " and ".join(SHORT_NAMES[kind] for kind, *_ in out) + " together",
                fields,
                combined,
            )
        )
    return out


def _shorter_sequence(job: TrainingJob, count: Callable[[TrainingJob], int]) -> Change | None:
    """The longest sequence below the job's (in steps of 128 tokens) at which a layout fits."""
    steps = (job.seq_length - 1) // SEQ_GRANULARITY
    if steps < 1:
        return None
    found: dict[int, int] = {}

    def feasible(k: int) -> int:
        found[k] = count(replace(job, seq_length=k * SEQ_GRANULARITY))
        return found[k]

    k, _probes = _largest(feasible, 1, steps)
    if k is None:
        return None
    length = k * SEQ_GRANULARITY
    return Change(
        kind="seq_length",
        description=f"train on sequences of {length:,} tokens",
        request={"seq_length": length},
        feasible_layouts=found[k],
    )


def _nearest(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    constraints: SearchConstraints,
    profile: PerformanceProfile,
    threshold: float,
    limit: int,
) -> tuple[NearLayout, ...]:
    """The rule-valid layouts needing the least memory, each with its excess and speed."""
    batch = enumerate_layouts(model, cluster, job, constraints)
    valid = np.flatnonzero(~check_rules(model, cluster, job, batch).any(axis=1))
    if not len(valid) or limit < 1:
        return ()
    ok = batch.take(valid)
    mem = estimate_memory(model, cluster, job, ok, MemoryOptions(threshold=threshold))
    order = np.argsort(np.asarray(mem.total_bytes), kind="stable")[: 8 * limit]
    chosen = ok.take(order)
    perf = estimate_performance(model, cluster, job, chosen, profile)
    cap = threshold * float(mem.capacity_bytes)
    out: list[NearLayout] = []
    seen: set[tuple[float, float]] = set()
    for k, i in enumerate(order):
        total = float(mem.total_bytes[i])
        over = max(total - cap, 0.0)
        speed = float(perf.tokens_per_s_per_gpu[k])
        # layouts that differ only in a setting that changes nothing here (sharding with
        # dp=1) are one point: keep the first
        key = (round(total / 2**20), round(speed, 1) if np.isfinite(speed) else -1.0)
        if key in seen:
            continue
        seen.add(key)
        if len(out) == limit:
            break
        out.append(
            NearLayout(
                layout=comm_flags.resolve(
                    model, cluster, chosen.layout(k), tp_overlap_on=job.tp_comm_overlap
                ).to_dict(),
                total_bytes=total,
                limit_bytes=cap,
                over_bytes=over,
                over_fraction=over / cap,
                tokens_per_s_per_gpu=speed if np.isfinite(speed) else None,
            )
        )
    return tuple(out)
