"""Megatron-LM's validation rules, checked for many layouts at once.

Each :class:`Rule` is one rule of megatron-facts §2 that a layout of a given model, cluster and
job can break. :func:`check_rules` evaluates all of them over a :class:`LayoutBatch` with numpy
(no Python loop over layouts); :func:`violations` explains the broken ones for a single layout
with the offending values and a fix.

Choices that are the planner's, not Megatron's:

* the pipeline split is the first of even, account-for-embedding-and-loss, or uneven first/last
  stages that Megatron accepts (``planner.model.pipeline``, rules 8-13);
* ``optimizer_sharding='full'`` is emitted as Torch-FSDP2 (``--use-torch-fsdp2``), so rule 58
  applies: no pipeline or expert parallelism and untied embeddings;
* ``sequence_parallel`` with ``tp=1`` is rejected: Megatron silently turns it off (rule 28), so
  such a layout would not be what it says;
* ``max_position_embeddings`` is emitted as ``max(model value, seq_length)``, so rule 23 only
  rejects a sequence longer than a *learned* position table, which cannot be stretched;
* ``tp * cp`` spanning nodes is legal; the performance model charges for it, the rules do not.

Rules are ordered from the most fundamental (world size, head split) to the most specific, so
that the first violated rule of a layout is the most useful reason to show. They live by theme:
:mod:`~planner.space.shape_rules`, :mod:`~planner.space.schedule_rules`,
:mod:`~planner.space.memory_rules` (and ``offload_rules``), :mod:`~planner.space.stack_rules`
(``cp_comm_rules``, ``version_rules``); :mod:`~planner.space.rule_context` holds what every check
sees. This module puts them in order and runs them.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import BoolArray, LayoutBatch
from planner.space.memory_rules import MEMORY_RULES
from planner.space.rule_context import Rule, RuleContext, rule
from planner.space.schedule_rules import SCHEDULE_RULES
from planner.space.shape_rules import SHAPE_RULES
from planner.space.stack_rules import STACK_RULES
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob

__all__ = ["RULES", "Rule", "check_rules", "violations"]

RULES: tuple[Rule, ...] = (
    *SHAPE_RULES,
    *SCHEDULE_RULES,
    *(rule(*s) for s in (*MEMORY_RULES, *STACK_RULES)),  # issues 13, 12
)
"""Every rule, the most fundamental first: a layout's first broken rule is the reason shown."""


def check_rules(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, batch: LayoutBatch
) -> BoolArray:
    """Boolean matrix of shape (len(batch), len(RULES)); True where a layout breaks a rule."""
    ctx = RuleContext.build(model, cluster, job, batch)
    out = np.zeros((len(batch), len(RULES)), dtype=np.bool_)
    for j, each in enumerate(RULES):
        out[:, j] = each.check(ctx)
    return out


def violations(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout
) -> list[str]:
    """Messages for every rule the layout breaks, naming the values and a fix."""
    batch = LayoutBatch.from_layouts([layout])
    ctx = RuleContext.build(model, cluster, job, batch)
    row = check_rules(model, cluster, job, batch)[0]
    return [RULES[j].explain(ctx, 0) for j in np.flatnonzero(row)]
