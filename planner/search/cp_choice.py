"""The planner's choice of ``--cp-comm-type`` for layouts that leave it open (issue 12 item 3).

The CP type changes one term of the step time, the attention of a cp > 1 layer (ring_attention's
variants, mechanisms-facts §1.2-1.5), and that term depends only on tp, cp, the micro-batch, the
sequence, the heads and the cluster. So instead of multiplying the candidates by four, the search
prices every type the rules allow (``planner.space.cp_comm_rules.valid_cp_comm``) once per
distinct (tp, cp, micro-batch) and gives each open layout the type with the least attention +
exposed communication + correction time per layer (``CpAttentionTime.total_s``). Where no ring
model applies (no collective curves, no attention-kernel prior, MLA), layouts keep Megatron's
default, p2p. A model with sliding-window attention gets all_gather, the only type stated to
support windows (planner.space.cp_comm_rules). all_gather holds the full-sequence K/V
(planner.memory.context_parallel), so given the memory options the choice keeps only the types
the layout still fits with.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.layouts import CP_COMM_AUTO, BoolArray, LayoutBatch
from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.performance.context import step_context
from planner.performance.context_parallel import ring_model
from planner.performance.profile import default_profile
from planner.space.cp_comm_rules import valid_cp_comm
from planner.space.version_rules import lacks
from planner.specs import CP_COMM_TYPES, ClusterSpec, ModelSpec, TrainingJob

__all__ = ["choose_cp_comm", "choose_open_cp_comm"]

ALL_GATHER = CP_COMM_TYPES.index("all_gather")


def choose_cp_comm(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    memory: MemoryOptions | None = None,
) -> LayoutBatch:
    """``batch`` with every open (None) ``cp_comm_type`` of a cp > 1 layout set to the fastest
    valid type; the hardware's kernel prior and collective curves decide (architecture priors:
    the fitted coefficients do not enter the CP attention term). With ``memory``, a type that
    holds more than p2p (all_gather's full-sequence K/V, planner.memory.context_parallel) is
    chosen only where the layout still fits; elsewhere the next fastest is."""
    codes = batch.cp_comm_codes
    open_rows = np.flatnonzero((codes == CP_COMM_AUTO) & (batch.cp > 1))
    if len(open_rows) == 0:
        return batch
    if model.window_size is not None:  # the one type with sliding windows (cp_comm_rules)
        stated = codes.copy()
        stated[open_rows] = ALL_GATHER
        return replace(batch, cp_comm_type=stated)
    keys = np.stack([batch.tp[open_rows], batch.cp[open_rows], batch.micro_batch_size[open_rows]])
    uniq, inverse = np.unique(keys, axis=1, return_inverse=True)
    k, n_types = uniq.shape[1], len(CP_COMM_TYPES)
    probe = LayoutBatch.from_columns(
        tp=np.tile(uniq[0], n_types),
        cp=np.tile(uniq[1], n_types),
        micro_batch_size=np.tile(uniq[2], n_types),
        cp_comm_type=np.repeat(np.arange(n_types), k),
    )
    ring = ring_model(step_context(model, cluster, job, probe, default_profile(cluster.gpu)))
    if ring is None:  # no ring model: Megatron's default, p2p, stated as what is priced
        stated = codes.copy()
        stated[open_rows] = CP_COMM_TYPES.index("p2p")
        return replace(batch, cp_comm_type=stated)
    cost = np.where(
        np.concatenate(
            [
                valid_cp_comm(model, cluster, probe.take(np.arange(i * k, (i + 1) * k)), i)
                for i in range(n_types)
            ]
        ),
        ring.total_s,
        np.inf,
    ).reshape(n_types, k)[:, np.ravel(inverse)]  # (types, open rows)
    for i, name in enumerate(CP_COMM_TYPES[1:], start=1):  # only the types the stack has
        if lacks(job, "cp_comm_type", name):
            cost[i] = np.inf
    best = np.argmin(cost, axis=0)  # p2p (0) is always valid and finite
    if memory is not None:
        gather = best == ALL_GATHER
        if np.any(gather):
            rows = open_rows[gather]
            trial = replace(batch.take(rows), cp_comm_type=np.full(len(rows), ALL_GATHER))
            misfit = ~np.asarray(estimate_memory(model, cluster, job, trial, memory).fits)
            cost[ALL_GATHER, np.flatnonzero(gather)[misfit]] = np.inf
            best = np.argmin(cost, axis=0)
    new = codes.copy()
    new[open_rows] = best
    return replace(batch, cp_comm_type=new)


def choose_open_cp_comm(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    valid: BoolArray,
    memory: MemoryOptions,
) -> LayoutBatch:
    """:func:`choose_cp_comm` on the ``valid`` layouts of a batch (evaluations: what a layout
    that passes Megatron's rules leaves open is the planner's to choose, as in the search); the
    others keep what they had."""
    rows = np.flatnonzero(valid)
    if len(rows) == 0:
        return batch
    chosen = choose_cp_comm(model, cluster, job, batch.take(rows), memory)
    codes = batch.cp_comm_codes.copy()
    codes[rows] = chosen.cp_comm_codes
    return replace(batch, cp_comm_type=codes)
