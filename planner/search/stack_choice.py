"""The stack settings the search chooses where the request leaves them open (issue 12 item 1:
"the search chooses the stack settings too, where they are the planner's to choose").

Two choices are made by speed, on the search's candidates:

* ``cp_comm_type`` of every feasible cp > 1 layout (:mod:`planner.search.cp_choice`, at
  screening time: it changes one separable term, the CP attention);
* ``cuda_graphs`` (here, :func:`choose_cuda_graphs`): CUDA graphs replay the same kernels, so
  they never change what is trained (mechanisms-facts §3.4); they remove host launch time and
  cost graph memory and a few Megatron rules. The host term is not separable from the rest of
  the step (each segment is max(GPU, host), ``planner.performance.host_term``), so the whole
  step is priced again for each mode; to keep that cheap it is done for the search's best
  candidates only (:data:`GRAPH_CANDIDATES`), which are then ranked again.

The others are resolved by rule, not by speed (``planner.space.comm_flags``: ``moe_a2a_overlap``
on where Megatron allows it, ``moe_dispatcher`` flex where the expert group spans nodes) or are
job-wide recommendations (``tp_comm_overlap``, ``attention_backend``, ``cross_entropy_fusion``);
each plan states what it used (``Plan.layout``, the launch flags) and the funnel counts the
choices (:func:`choice_counts`). docs/stack-settings.md has the table.
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from planner.layout_settings import GRAPHS_FULL, GRAPHS_PARTIAL
from planner.layout_types import CUDA_GRAPHS_CHOICES
from planner.layouts import CP_COMM_AUTO, FloatArray, IntArray
from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.performance.step_time import PerformanceProfile, estimate_performance
from planner.search.kernel_choice import choose_kernel
from planner.search.ranking import rank_order
from planner.space.rules import check_rules
from planner.specs import CP_COMM_TYPES, ModelSpec

if TYPE_CHECKING:
    from planner.search.sampling import CandidatePool
    from planner.search.screening import Scenario
    from planner.space.enumeration import SearchConstraints

__all__ = [
    "GRAPH_CANDIDATES",
    "MIN_GRAPH_GAIN",
    "choice_counts",
    "choose_cuda_graphs",
    "choose_open_stack",
]

GRAPH_CANDIDATES = 64
"""Best candidates (at least 4 x top_k) whose CUDA-graph mode the search chooses."""
MIN_GRAPH_GAIN = 0.01
"""A graph mode replaces a less constraining one (none < partial < full_iteration) only where
it raises tokens/s by at least 1 %: graphs bind the run to static shapes and capture-safe code
(mechanisms-facts §3.4), a cost the model does not price, so the planner recommends them where
they matter; 1 % is below the model's cross-validated error, so smaller gains are noise."""


def choose_cuda_graphs(
    model: ModelSpec,
    scenarios: Sequence[Scenario],
    pool: CandidatePool,
    profile: PerformanceProfile,
    threshold: float,
    idx: IntArray,
) -> dict[str, int]:
    """Give the pool's layouts ``idx`` (evaluated with ``cuda_graphs='none'``) the CUDA-graph
    mode of the most tokens/s among those that pass Megatron's rules and fit, by
    :data:`MIN_GRAPH_GAIN` steps; updates the pool in place (the mode, tokens/s, headroom) and
    returns how many layouts got each mode."""
    if pool.batch.settings is None:  # every layout at the defaults: give it columns to update
        pool.batch = replace(pool.batch, settings=pool.batch.mem)
    settings = pool.batch.mem
    options = MemoryOptions(threshold=threshold)
    for s in np.unique(pool.scenario[idx]).tolist():
        sub = idx[pool.scenario[idx] == s]
        sc = scenarios[int(s)]
        base = pool.batch.take(sub)
        best = pool.tokens_per_s_per_gpu[sub].copy()
        for code in (GRAPHS_PARTIAL, GRAPHS_FULL):
            trial = replace(base, settings=replace(base.mem, cuda_graphs=np.full(len(sub), code)))
            ok = ~np.asarray(check_rules(model, sc.cluster, sc.job, trial)).any(axis=1)
            mem = estimate_memory(model, sc.cluster, sc.job, trial, options)
            ok &= np.asarray(mem.fits, dtype=np.bool_)
            rows = np.flatnonzero(ok)
            if not len(rows):
                continue
            perf = estimate_performance(model, sc.cluster, sc.job, trial.take(rows), profile)
            tps = np.nan_to_num(np.asarray(perf.tokens_per_s_per_gpu, np.float64), nan=0.0)
            better = tps > best[rows] * (1.0 + MIN_GRAPH_GAIN)
            won, at = rows[better], sub[rows[better]]
            best[won] = tps[better]
            settings.cuda_graphs[at] = code
            pool.tokens_per_s_per_gpu[at] = tps[better]
            limit = threshold * float(mem.capacity_bytes)
            pool.headroom_bytes[at] = limit - np.asarray(mem.total_bytes, np.float64)[won]
    codes = np.bincount(settings.cuda_graphs[idx], minlength=len(CUDA_GRAPHS_CHOICES))
    return {CUDA_GRAPHS_CHOICES[i]: int(n) for i, n in enumerate(codes.tolist()) if n}


def choose_open_stack(
    model: ModelSpec,
    scenarios: MutableSequence[Scenario],
    pool: CandidatePool,
    profile: PerformanceProfile,
    constraints: SearchConstraints,
    threshold: float,
    top_k: int,
    score: Callable[[IntArray], FloatArray],
) -> IntArray:
    """The pool's evaluated layouts, once the search has chosen the expert-GEMM kernel
    (:mod:`planner.search.kernel_choice`: replaces the open scenarios' jobs) and the CUDA graphs
    of its best ones (where the request left them open); records what it chose in
    ``pool.choices``."""
    done = np.flatnonzero(pool.evaluated)
    graphs = kernels = None
    if len(done):
        best = done[rank_order(score(done), pool.headroom_bytes[done], pool.num_gpus[done])]
        chosen = best[: max(GRAPH_CANDIDATES, 4 * top_k)]
        # the expert-GEMM kernel first: graphs price the host time, which the kernel changes
        kernels = choose_kernel(model, scenarios, pool, profile, chosen)
        if constraints.memory.cuda_graphs is None:  # the planner's to choose
            graphs = choose_cuda_graphs(model, scenarios, pool, profile, threshold, chosen)
    pool.choices = choice_counts(pool, cp_open=constraints.cp_comm_type is None, graphs=graphs)
    if kernels:
        pool.choices["moe_grouped_gemm_kernel"] = kernels
    return done


def choice_counts(
    pool: CandidatePool, *, cp_open: bool, graphs: dict[str, int] | None
) -> dict[str, Any]:
    """What the search chose, for the funnel: the CP type of the feasible cp > 1 layouts (when
    the request left it open) and the CUDA-graph mode of the best candidates (when it did)."""
    out: dict[str, Any] = {}
    if cp_open:
        codes = pool.batch.cp_comm_codes[pool.batch.cp > 1]
        codes = codes[codes != CP_COMM_AUTO]
        if len(codes):
            counts = np.bincount(codes, minlength=len(CP_COMM_TYPES)).tolist()
            out["cp_comm_type"] = {CP_COMM_TYPES[i]: n for i, n in enumerate(counts) if n}
    if graphs:
        out["cuda_graphs"] = graphs
    return out
