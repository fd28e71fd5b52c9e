"""Why nothing fits: the least memory any valid layout needs, with every memory saving on.

When an inverse question (or a plan) finds no layout, the useful answers are how far the best
layout is from the memory line, which of its terms cannot shrink, and on how many GPUs it would
fit. :func:`relaxed_constraints` turns on every saving Megatron-LM offers (full recompute, the
distributed optimizer or Torch-FSDP2, optimizer offload 1.0 and fine-grained activation offload
where the cluster states its host link and memory); :func:`least_memory_layout` finds the
valid layout with the smallest per-GPU peak under them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.rules import check_rules
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob

__all__ = ["MemoryFloor", "least_memory_layout", "relaxed_constraints"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFloor:
    """The valid layout with the least per-GPU memory, and its terms."""

    layout: Layout
    total_bytes: float
    """Peak bytes on its most loaded GPU."""
    terms: dict[str, float]
    """Each term of that peak (planner.memory.estimate.TERM_NAMES)."""
    limit_bytes: float
    """threshold x HBM: what the peak must stay under."""
    host_bytes: float
    """Bytes it puts in host memory per GPU."""


def relaxed_constraints(cluster: ClusterSpec, base: SearchConstraints) -> SearchConstraints:
    """``base`` with every memory saving allowed (offload only with a host link and memory)."""
    hosted = (
        cluster.gpu.host_link_bandwidth_bytes_per_s is not None
        and cluster.host_memory_bytes_per_gpu is not None
    )
    memory = replace(
        base.memory,
        optimizer_offload_fraction=(0.0, 1.0) if hosted else (0.0,),
        search_activation_offload=hosted,
    )
    return replace(
        base,
        recompute=("none", "selective", "full"),
        optimizer_sharding=("none", "optimizer", "full"),
        memory=memory,
    )


def least_memory_layout(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    constraints: SearchConstraints,
    threshold: float = 0.8,
) -> MemoryFloor | None:
    """The valid layout with the smallest peak (None when no layout passes the rules)."""
    batch = enumerate_layouts(model, cluster, job, constraints)
    valid = np.flatnonzero(~check_rules(model, cluster, job, batch).any(axis=1))
    if valid.size == 0:
        return None
    batch = batch.take(valid)
    mem = estimate_memory(model, cluster, job, batch, MemoryOptions(threshold=threshold))
    i = int(np.argmin(mem.total_bytes))
    host = mem.host_bytes
    return MemoryFloor(
        layout=batch.layout(i),
        total_bytes=float(mem.total_bytes[i]),
        terms={k: float(v[i]) for k, v in mem.terms.items()},
        limit_bytes=threshold * mem.capacity_bytes,
        host_bytes=float(host[i]) if host is not None else 0.0,
    )
