"""The planner's choice of ``--cp-comm-type`` for layouts that leave it open (issue 12 item 3).

The CP type changes one term of the step time, the attention of a cp > 1 layer (ring_attention's
variants, mechanisms-facts §1.2-1.5), and that term depends only on tp, cp, the micro-batch, the
sequence, the heads and the cluster. So instead of multiplying the candidates by four, the search
prices every type the rules allow (``planner.space.cp_comm_rules.valid_cp_comm``) once per
distinct (tp, cp, micro-batch) and gives each open layout the type with the least attention +
exposed communication + correction time per layer (``CpAttentionTime.total_s``). Where no ring
model applies (no collective curves, no attention-kernel prior, MLA), layouts keep Megatron's
default, p2p.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.layouts import CP_COMM_AUTO, LayoutBatch
from planner.performance.context import step_context
from planner.performance.context_parallel import ring_model
from planner.performance.profile import default_profile
from planner.space.cp_comm_rules import valid_cp_comm
from planner.specs import CP_COMM_TYPES, ClusterSpec, ModelSpec, TrainingJob

__all__ = ["choose_cp_comm"]


def choose_cp_comm(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, batch: LayoutBatch
) -> LayoutBatch:
    """``batch`` with every open (None) ``cp_comm_type`` of a cp > 1 layout set to the fastest
    valid type; the hardware's kernel prior and collective curves decide (architecture priors:
    the fitted coefficients do not enter the CP attention term)."""
    codes = batch.cp_comm_codes
    open_rows = np.flatnonzero((codes == CP_COMM_AUTO) & (batch.cp > 1))
    if len(open_rows) == 0:
        return batch
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
    if ring is None:
        return batch
    cost = np.where(
        np.concatenate(
            [
                valid_cp_comm(model, cluster, probe.take(np.arange(i * k, (i + 1) * k)), i)
                for i in range(n_types)
            ]
        ),
        ring.total_s,
        np.inf,
    ).reshape(n_types, k)
    best = np.argmin(cost, axis=0)  # p2p (0) is always valid and finite
    new = codes.copy()
    new[open_rows] = best[np.ravel(inverse)]
    return replace(batch, cp_comm_type=new)
