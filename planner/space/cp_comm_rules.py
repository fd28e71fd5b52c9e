"""Rules of ``--cp-comm-type`` (issue 12 item 3): which CP communication a layout may use.

* ``a2a`` (Ulysses) splits the heads of each TP rank over the c CP ranks: TE asserts "The number
  of attention heads needs to be divisible by CP size!" for the query and the KV heads
  (megatron-facts §2 rule 25, mechanisms-facts §1.4).
* ``a2a+p2p`` needs ``--hierarchical-context-parallel-sizes c1 c2`` with c1 c2 = c (rule 24);
  the planner takes c1 = the CP ranks that share a node (all-to-all on NVLink, ring across
  nodes, mechanisms-facts §1.5), so the CP group must span nodes with more than one rank on
  each, and c1 must divide the heads as for ``a2a``.
* Every non-default type needs Megatron core >= 0.10 and TE >= 1.10 / 1.11 / 1.12 for
  all_gather / a2a / a2a+p2p (mechanisms-facts §1.6, §9 version table): a version note, not a
  rule, since the planner does not know the user's container.
* Sliding-window attention with cp > 1 needs ``all_gather``: mechanisms-facts §1.3 says the
  all-gather implementation "Supports sliding windows (FusedAttention or FA3)" and states no such
  support for p2p or a2a [inferred from §1.3].
* Multi-latent attention is priced by the generic ring fallback whatever the type
  (:mod:`planner.performance.context_parallel`); no rule here, none in the facts sheets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.layouts import CP_COMM_AUTO, BoolArray, FloatArray, LayoutBatch
from planner.space.rule_context import RuleContext
from planner.specs import CP_COMM_TYPES, ClusterSpec, ModelSpec

__all__ = ["CP_COMM_RULES", "hierarchical_sizes", "valid_cp_comm"]

Ctx = RuleContext

P2P, ALL_GATHER, A2A, A2A_P2P = range(len(CP_COMM_TYPES))


def _codes(ctx: Ctx) -> Any:
    codes = ctx.batch.cp_comm_codes
    return np.where(codes == CP_COMM_AUTO, P2P, codes)


def _heads(model: ModelSpec, tp: Any) -> tuple[FloatArray, FloatArray]:
    a = model.num_attention_heads / np.maximum(tp, 1)
    g = np.maximum(model.query_groups / np.maximum(tp, 1), 1.0)
    return np.asarray(a, np.float64), np.asarray(g, np.float64)


def hierarchical_sizes(cluster: ClusterSpec, tp: Any, cp: Any) -> tuple[Any, Any]:
    """(c1, c2) of ``--hierarchical-context-parallel-sizes``: c1 = CP ranks on one node (CP
    ranks follow TP in the rank order, mechanisms-facts §1.6), c2 = cp / c1."""
    per_node = np.maximum(cluster.gpus_per_node // np.maximum(np.asarray(tp), 1), 1)
    c1 = np.minimum(np.asarray(cp), per_node)
    return c1, np.asarray(cp) // np.maximum(c1, 1)


def valid_cp_comm(
    model: ModelSpec, cluster: ClusterSpec, batch: LayoutBatch, code: int
) -> BoolArray:
    """Where the layouts of ``batch`` may run the CP type of ``code`` (an index of CP_COMM_TYPES);
    p2p and all_gather everywhere, a2a and a2a+p2p by the rules of the module docstring, and
    only all_gather for a model with sliding windows."""
    ok = _heads_allow(model, cluster, batch, code)
    if model.window_size is not None and code != ALL_GATHER:
        ok = ok & (batch.cp <= 1)
    return np.asarray(ok, np.bool_)


def _heads_allow(model: ModelSpec, cluster: ClusterSpec, batch: LayoutBatch, code: int) -> Any:
    tp, cp = batch.tp, batch.cp
    a, g = _heads(model, tp)
    if code == A2A:
        return np.asarray((np.mod(a, cp) == 0) & (np.mod(g, cp) == 0), np.bool_)
    if code == A2A_P2P:
        c1, c2 = hierarchical_sizes(cluster, tp, cp)
        heads = (np.mod(a, c1) == 0) & (np.mod(g, c1) == 0)
        return np.asarray((c1 >= 2) & (c2 >= 2) & (c1 * c2 == cp) & heads, np.bool_)
    return np.ones(len(batch), dtype=np.bool_)


def _a2a_check(ctx: Ctx) -> BoolArray:
    ok = _heads_allow(ctx.model, ctx.cluster, ctx.batch, A2A)
    return np.asarray((_codes(ctx) == A2A) & (ctx.batch.cp > 1) & ~ok, np.bool_)


def _a2a_explain(ctx: Ctx, i: int) -> str:
    tp, cp = ctx.value("tp", i), ctx.value("cp", i)
    a, g = _heads(ctx.model, np.array([tp]))
    return (
        f"cp_comm_type='a2a' splits the heads over the CP ranks: cp={cp} must divide the "
        f"{a[0]:g} attention heads and {g[0]:g} KV heads per TP rank (tp={tp}); choose a cp "
        "that divides them, or cp_comm_type 'p2p' or 'all_gather'"
    )


def _hier_check(ctx: Ctx) -> BoolArray:
    ok = _heads_allow(ctx.model, ctx.cluster, ctx.batch, A2A_P2P)
    return np.asarray((_codes(ctx) == A2A_P2P) & (ctx.batch.cp > 1) & ~ok, np.bool_)


def _hier_explain(ctx: Ctx, i: int) -> str:
    tp, cp = ctx.value("tp", i), ctx.value("cp", i)
    c1, c2 = hierarchical_sizes(ctx.cluster, np.array([tp]), np.array([cp]))
    return (
        f"cp_comm_type='a2a+p2p' runs an all-to-all inside a node and the ring across nodes "
        f"(--hierarchical-context-parallel-sizes c1 c2 with c1*c2 = cp): here tp={tp}, cp={cp} "
        f"and {ctx.cluster.gpus_per_node} GPUs per node give c1={int(c1[0])}, c2={int(c2[0])}; "
        "it needs c1 >= 2 and c2 >= 2 with c1 dividing the heads per TP rank; use 'p2p' or "
        "'a2a' instead"
    )


def _window_check(ctx: Ctx) -> BoolArray:
    if ctx.model.window_size is None:
        return np.zeros(len(ctx.batch), dtype=np.bool_)
    return np.asarray((_codes(ctx) != ALL_GATHER) & (ctx.batch.cp > 1), np.bool_)


def _window_explain(ctx: Ctx, i: int) -> str:
    code = int(_codes(ctx)[i])
    left, right = ctx.model.window_size or (0, 0)
    return (
        f"the model uses sliding-window attention (window_size=[{left}, {right}]); with "
        f"cp={ctx.value('cp', i)} only cp_comm_type 'all_gather' supports sliding windows "
        f"[inferred from mechanisms-facts §1.3], not {CP_COMM_TYPES[code]!r}: set "
        "cp_comm_type='all_gather' or cp=1"
    )


_S = "megatron-facts §2.3 rules 24-25; mechanisms-facts §1.4-1.6"
CP_COMM_RULES: tuple[tuple[str, str, str, Any, Any], ...] = (
    ("cp_window_needs_all_gather",
     "sliding-window attention with cp > 1 needs cp_comm_type='all_gather'",
     "megatron-facts §1.1 (--cp-comm-type); mechanisms-facts §1.3 [inferred]",
     _window_check, _window_explain),
    ("cp_a2a_heads_divisible", "cp_comm_type='a2a' needs cp to divide the heads per TP rank",
     _S, _a2a_check, _a2a_explain),
    ("cp_a2a_p2p_hierarchical",
     "cp_comm_type='a2a+p2p' needs a CP group across nodes with >= 2 ranks on each node",
     _S, _hier_check, _hier_explain),
)  # fmt: skip
