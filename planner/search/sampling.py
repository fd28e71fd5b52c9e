"""The sampled search: a seeded Optuna TPE study over the feasible layouts, then a local polish.

The feasible set is known before sampling starts (rules and memory are cheap and vectorised).
TPE samples the sizes that shape a layout (tp, pp, cp, ep, and the GPU count and batch size when
they are ranges); each sampled combination is a *cell* of the feasible set, found by binary
search on mixed-radix codes, and all of the cell's layouts (vpp, micro-batch, recompute,
sharding...) are evaluated in one numpy call: a trial's value is the cell's best. Cells outside
the feasible set are told the objective's worst value. Trials are asked in batches
(``study.ask`` n times, one evaluation, ``study.tell`` n times); revisited cells cost nothing.

Measured on the benchmark (bench/results/search.md), TPE over every axis at once finds the
optimum poorly, because the feasible part of that product space is a thin, structured subset;
sampling only the shaping sizes fixes most of it. A polish follows: the best layouts of the
best cells are compared with every feasible layout that differs from them in one to three
groups of coupled axes (all of them, vectorised), until nothing improves.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution

from planner.layouts import IntArray, LayoutBatch
from planner.search.objectives import FloatArray, Objective
from planner.specs import OPTIMIZER_SHARDING_CHOICES, RECOMPUTE_CHOICES

SAMPLED_AXES = ("tp", "pp", "cp", "ep")
"""What TPE samples; the other axes of each sampled cell are evaluated exhaustively."""
LAYOUT_AXES = (
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "micro_batch_size",
    "recompute",
    "sequence_parallel",
    "optimizer_sharding",
    "moe_a2a_overlap",
)
_LABELS: dict[str, tuple[Any, ...]] = {
    "recompute": RECOMPUTE_CHOICES,
    "optimizer_sharding": OPTIMIZER_SHARDING_CHOICES,
}
TOP_TO_POLISH = 8
# axes that move together count as one step of the polish: sequence parallelism and expert tp
# follow tp, and vpp must divide the layers per pipeline stage so it follows pp
NEIGHBOUR_GROUPS = (
    ("tp", "etp", "sequence_parallel"),
    ("pp", "vpp"),
    ("cp",),
    ("ep",),
    ("micro_batch_size",),
    ("recompute",),
    ("optimizer_sharding",),
    ("moe_a2a_overlap",),
)

Evaluate = Callable[[IntArray], None]
Progress = Callable[[int, int], None]


@dataclass(slots=True)
class CandidatePool:
    """The feasible layouts of every scenario (cluster x job) and what is known about them."""

    batch: LayoutBatch
    scenario: IntArray
    """Index into the scenario list of each layout."""
    num_gpus: IntArray
    global_batch_size: IntArray
    headroom_bytes: FloatArray
    """threshold x HBM - estimated bytes (>= 0 for every feasible layout)."""
    tokens_per_s_per_gpu: FloatArray
    """NaN until the layout's performance is evaluated."""
    choices: dict[str, Any] = field(default_factory=dict)
    """Stack settings the search chose and for how many layouts (planner.search.stack_choice)."""

    def __len__(self) -> int:
        return len(self.batch)

    @property
    def evaluated(self) -> npt.NDArray[np.bool_]:
        return ~np.isnan(self.tokens_per_s_per_gpu)


@dataclass(frozen=True, slots=True)
class _Axis:
    name: str
    codes: IntArray
    """Per pool layout, the index of its value among ``labels``."""
    labels: tuple[Any, ...]
    """The values shown to Optuna (ints, bools or strings)."""


class SpaceEncoding:
    """Maps pool layouts to Optuna parameters and back, through mixed-radix integer codes.

    Optuna samples ``sampled`` axes only (None: all of them). The layouts that share values on
    those axes form a *cell*; a trial names a cell, and :meth:`members` lists its layouts.
    """

    def __init__(
        self,
        pool: CandidatePool,
        scenario_axes: dict[str, IntArray],
        sampled: tuple[str, ...] | None = None,
    ) -> None:
        columns: dict[str, IntArray] = {
            name: np.asarray(getattr(pool.batch, name)).astype(np.int64) for name in LAYOUT_AXES
        }
        columns.update(scenario_axes)
        self.axes: list[_Axis] = []
        for name, column in columns.items():
            values, codes = np.unique(column, return_inverse=True)
            labels = tuple(_label(name, int(v)) for v in values)
            self.axes.append(_Axis(name=name, codes=codes.astype(np.int64), labels=labels))
        self.groups = self._group_matrix()
        names = set(columns) if sampled is None else set(sampled) | set(scenario_axes)
        self.sampled = [a for a in self.axes if a.name in names]
        radix = [len(a.labels) for a in self.sampled]
        if float(np.prod(np.asarray(radix, dtype=np.float64))) >= 2.0**62:
            raise OverflowError("search space too large to encode in 64 bits")
        self.strides = np.cumprod([1, *radix[:-1]]).astype(np.int64)
        codes = self.encode_codes(np.stack([a.codes for a in self.sampled], axis=1))
        # cells: unique codes, and the pool indices of each cell contiguous in self.order
        self.order = np.argsort(codes, kind="stable").astype(np.int64)
        self.cell_codes, self.cell_start = np.unique(codes[self.order], return_index=True)
        self.cell_end = np.append(self.cell_start[1:], len(codes))
        self.cell_of = np.empty(len(codes), dtype=np.int64)
        self.cell_of[self.order] = np.repeat(
            np.arange(len(self.cell_start)), self.cell_end - self.cell_start
        )
        self.distributions: dict[str, BaseDistribution] = {
            a.name: CategoricalDistribution(list(a.labels))
            for a in self.sampled
            if len(a.labels) > 1
        }
        self._index = {a.name: {lab: k for k, lab in enumerate(a.labels)} for a in self.sampled}

    def encode_codes(self, matrix: IntArray) -> IntArray:
        encoded: IntArray = (matrix * self.strides[None, :]).sum(axis=1)
        return encoded

    def lookup(self, params: list[dict[str, Any]]) -> IntArray:
        """Cell of each parameter set, -1 where no feasible layout has those values."""
        matrix = np.array(
            [
                [self._index[a.name][p[a.name]] if a.name in p else 0 for a in self.sampled]
                for p in params
            ],
            dtype=np.int64,
        ).reshape(len(params), len(self.sampled))
        codes = self.encode_codes(matrix)
        pos = np.searchsorted(self.cell_codes, codes)
        pos_safe = np.minimum(pos, len(self.cell_codes) - 1)
        hit = (pos < len(self.cell_codes)) & (self.cell_codes[pos_safe] == codes)
        return np.where(hit, pos_safe, -1).astype(np.int64)

    def members(self, cells: IntArray) -> IntArray:
        """Pool indices of the layouts in the given cells."""
        parts = [self.order[self.cell_start[c] : self.cell_end[c]] for c in cells]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def params(self, i: int) -> dict[str, Any]:
        """The Optuna parameters of pool layout i (axes with one value are left out)."""
        return {
            a.name: a.labels[int(a.codes[i])] for a in self.sampled if a.name in self.distributions
        }

    def _group_matrix(self) -> IntArray:
        """Per layout, one code per group of coupled axes (see NEIGHBOUR_GROUPS)."""
        by_name = {a.name: a for a in self.axes}
        cols: list[IntArray] = []
        for group in NEIGHBOUR_GROUPS:
            code = np.zeros(len(self.axes[0].codes), dtype=np.int64)
            for name in group:
                axis = by_name[name]
                code = code * len(axis.labels) + axis.codes
            cols.append(code)
        grouped = {n for g in NEIGHBOUR_GROUPS for n in g}
        cols += [a.codes for a in self.axes if a.name not in grouped]  # scenario axes
        return np.stack(cols, axis=1)

    def neighbours(self, i: int, radius: int = 3) -> IntArray:
        """Pool layouts that differ from layout i in 1 to ``radius`` groups of coupled axes."""
        diff = (self.groups != self.groups[i][None, :]).sum(axis=1)
        found: IntArray = np.flatnonzero((diff >= 1) & (diff <= radius)).astype(np.int64)
        return found


def _label(name: str, value: int) -> Any:
    if name in _LABELS:
        return _LABELS[name][value]
    if name == "sequence_parallel":
        return bool(value)
    if name == "moe_a2a_overlap":
        return "auto" if value < 0 else bool(value)
    return value


def create_study(
    objective: Objective,
    *,
    seed: int,
    storage: str | optuna.storages.BaseStorage | None,
    study_name: str | None,
    sampler: optuna.samplers.BaseSampler | None = None,
) -> optuna.Study:
    """An Optuna study in the objective's direction (in memory unless a storage is given)."""
    if sampler is None:
        with warnings.catch_warnings():  # multivariate TPE is flagged experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # multivariate TPE models the axes jointly: the feasible set is far from a product
            sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=False)
    return optuna.create_study(
        storage=storage,
        study_name=study_name,
        sampler=sampler,
        direction=objective.direction,
        load_if_exists=study_name is not None,
    )


def warm_start(pool: CandidatePool, gpus_per_node: IntArray, per_scenario: int = 2) -> IntArray:
    """Known-good layouts to try first, per scenario: tp near min(8, gpus per node), the fewest
    pipeline stages and context-parallel ranks, the largest micro-batch, the least recompute."""
    b = pool.batch
    target = np.minimum(8, gpus_per_node[pool.scenario])
    picks: list[int] = []
    for s in np.unique(pool.scenario)[:32]:
        rows = np.flatnonzero(pool.scenario == s)
        tp_gap = np.abs(np.log2(b.tp[rows]) - np.log2(target[rows]))
        # lexsort: the last key is the primary one
        order = np.lexsort(
            (
                b.vpp[rows],
                b.recompute[rows],
                -b.micro_batch_size[rows],
                b.cp[rows],
                b.pp[rows],
                tp_gap,
            )
        )
        seen_tp: set[int] = set()
        for j in rows[order]:
            if int(b.tp[j]) in seen_tp:
                continue
            seen_tp.add(int(b.tp[j]))
            picks.append(int(j))
            if len(seen_tp) >= per_scenario:
                break
    return np.asarray(picks, dtype=np.int64)


def run_tpe(
    study: optuna.Study,
    encoding: SpaceEncoding,
    pool: CandidatePool,
    objective: Objective,
    evaluate: Evaluate,
    *,
    max_trials: int,
    batch_size: int,
    warm: IntArray,
    deadline: float | None,
    progress: Progress | None,
) -> int:
    """Ask/tell ``max_trials`` trials in batches; returns the number of trials run.

    A trial's value is the best layout of its cell (all of the cell evaluated at once).
    """
    for j in warm[: max(1, max_trials // 4)]:
        study.enqueue_trial(encoding.params(int(j)), skip_if_exists=True)
    dists = encoding.distributions
    done = 0
    worst = objective.worst_value()
    cell_value: dict[int, float] = {}
    while done < max_trials:
        if done and deadline is not None and time.perf_counter() > deadline:
            break  # the first batch always runs, so a late start still gives an answer
        trials = [study.ask(dists) for _ in range(min(batch_size, max_trials - done))]
        cells = encoding.lookup([t.params for t in trials])
        fresh = np.array(
            [c for c in np.unique(cells[cells >= 0]) if int(c) not in cell_value], dtype=np.int64
        )
        if len(fresh):
            members = encoding.members(fresh)
            evaluate(members[np.isnan(pool.tokens_per_s_per_gpu[members])])
            for c in fresh:
                m = encoding.members(np.array([c]))
                v = objective.values(pool.tokens_per_s_per_gpu[m], pool.num_gpus[m])
                cell_value[int(c)] = float(
                    v.max() if objective.direction == "maximize" else v.min()
                )
        for trial, c in zip(trials, cells, strict=True):
            study.tell(trial, cell_value.get(int(c), worst))
        done += len(trials)
        if progress is not None:
            progress(done, max_trials)
    return done


def polish(
    encoding: SpaceEncoding,
    pool: CandidatePool,
    score: Callable[[IntArray], FloatArray],
    evaluate: Evaluate,
    *,
    rounds: int,
    deadline: float | None,
) -> IntArray:
    """Evaluate the near neighbours of the best layouts until the best stops improving.

    Returns the pool indices evaluated here, so that the caller can record them in the study.
    """
    added: list[IntArray] = []
    for _ in range(rounds):
        if deadline is not None and time.perf_counter() > deadline:
            break
        done = np.flatnonzero(pool.evaluated)
        if len(done) == 0:
            break
        s = score(done)
        ranked = done[np.argsort(-s, kind="stable")]
        # the best layout of each of the best cells: near-copies of one layout explore little
        _, first = np.unique(encoding.cell_of[ranked], return_index=True)
        top = ranked[np.sort(first)[:TOP_TO_POLISH]]
        best_before = float(s.max())
        near = np.unique(np.concatenate([encoding.neighbours(int(i)) for i in top]))
        near = near[np.isnan(pool.tokens_per_s_per_gpu[near])]
        if len(near) == 0:
            break
        evaluate(near)
        added.append(near)
        if not float(score(near).max()) > best_before:
            break
    return np.concatenate(added) if added else np.zeros(0, dtype=np.int64)


def record_trials(
    study: optuna.Study,
    encoding: SpaceEncoding,
    pool: CandidatePool,
    objective: Objective,
    indices: IntArray,
) -> None:
    """Add evaluated layouts to the study as finished trials (one bulk add_trials call)."""
    if len(indices) == 0:
        return
    values = objective.values(pool.tokens_per_s_per_gpu[indices], pool.num_gpus[indices])
    trials = [
        optuna.trial.create_trial(
            params=encoding.params(int(i)),
            distributions=encoding.distributions,
            value=float(v),
        )
        for i, v in zip(indices, values, strict=True)
        if np.isfinite(v)
    ]
    study.add_trials(trials)
