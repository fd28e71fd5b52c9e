"""What every Megatron rule check sees, and the :class:`Rule` record that pairs a check with its
message.

A check takes a :class:`RuleContext` (the model, cluster and job scalars plus the layout columns
of a :class:`~planner.layouts.LayoutBatch`) and returns one bool per layout, True where the layout
breaks the rule; numpy does the work, never a Python loop over layouts. An explain takes the same
context and one row index and names the offending values and a fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from planner.layouts import BoolArray, IntArray, LayoutBatch
from planner.specs import ClusterSpec, ModelSpec, TrainingJob

__all__ = ["Check", "Explain", "Rule", "RuleContext", "rule", "unbroken", "valid_values"]

_MAX_LISTED = 12
"""How many valid values a message lists before it ends with '...'."""


@dataclass(frozen=True, slots=True)
class RuleContext:
    """The inputs of every rule: scalars of the model/job and the layout columns."""

    model: ModelSpec
    cluster: ClusterSpec
    job: TrainingJob
    batch: LayoutBatch
    microbatches: IntArray
    """m = B / (b dp) where it divides exactly, else 0 (megatron-facts §3.2)."""

    @classmethod
    def build(
        cls, model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, batch: LayoutBatch
    ) -> RuleContext:
        per = np.maximum(batch.micro_batch_size * batch.dp, 1)
        b = job.global_batch_size
        m = np.where(b % per == 0, b // per, 0)
        return cls(model=model, cluster=cluster, job=job, batch=batch, microbatches=m)

    def col(self, name: str) -> IntArray:
        """A layout column with values below 1 raised to 1, safe as a divisor."""
        values: IntArray = np.maximum(getattr(self.batch, name), 1)
        return values

    def value(self, name: str, i: int) -> int:
        """Layout ``i``'s value of a column, for messages."""
        return int(getattr(self.batch, name)[i])


Check = Callable[[RuleContext], BoolArray]
Explain = Callable[[RuleContext, int], str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One Megatron-LM validation rule; ``check`` is True where a layout breaks it."""

    id: str
    """Short snake_case name, stable across releases (used in histograms and the API)."""
    summary: str
    """One sentence a person can act on."""
    source: str
    """Where the rule is documented (megatron-facts section and rule number)."""
    check: Check = field(repr=False, compare=False)
    explain: Explain = field(repr=False, compare=False)


def rule(rid: str, summary: str, source: str, check: Check, explain: Explain) -> Rule:
    """A :class:`Rule` from positional fields, so that the rule tables read as one line each."""
    return Rule(id=rid, summary=summary, source=source, check=check, explain=explain)


def _listed(values: Iterable[int]) -> str:
    items = list(values)
    text = ", ".join(map(str, items[:_MAX_LISTED]))
    return text + (", ..." if len(items) > _MAX_LISTED else "") if items else "none"


def valid_values(ctx: RuleContext, ok: Callable[[int], bool], upto: int | None = None) -> str:
    """The values 1..upto (default: the GPU count) that satisfy ``ok``, for messages."""
    limit = ctx.cluster.num_gpus if upto is None else upto
    return _listed(v for v in range(1, limit + 1) if ok(v))


def unbroken(ctx: RuleContext) -> BoolArray:
    """All False: no layout breaks the rule (it does not apply to this model or job)."""
    return np.zeros(len(ctx.batch), dtype=np.bool_)
