"""The layout space: every combination of parallel sizes the planner considers, as one batch.

:class:`SearchConstraints` narrows each axis (a fixed value, an allowed tuple or a maximum);
:func:`enumerate_layouts` builds the full cartesian product of the remaining candidates with
numpy and derives ``dp``; :func:`rejection_histogram` says, for the layouts that Megatron would
refuse, which rule refused them first.

Candidates per axis when the user does not fix it:

* tp: powers of two and divisors of ``num_attention_heads``, up to ``gpus_per_node``;
* pp: the values for which Megatron can split ``num_layers`` (planner.model.pipeline), vpp: likewise
  (only when pp > 1), cp: powers of two, ep: divisors of ``num_experts`` (1 for a dense model),
  etp: 1 and tp for a MoE model (tp for a dense one), micro_batch_size: powers of two up to the
  global batch;
* sequence_parallel: on exactly when tp > 1 (``tp=1`` never gets it: Megatron would switch it off);
* every recompute mode; optimizer sharding: the distributed optimizer or none (``full``, Torch
  FSDP2, only when asked for: :attr:`SearchConstraints.optimizer_sharding`);
* for a MoE model, each layout again with the all-to-all overlap off where it would be on (it
  holds one more layer of activations); each value of the memory settings that
  :class:`MemoryChoices` lets the search vary.

Only cheap structural pruning happens before the product (tp, pp and cp must divide the GPU
count, and so must their product), so that the rules, not the enumeration, explain rejections.
When user-fixed sizes leave no layout whose product divides the GPU count, those layouts are kept
(with dp rounded) so that the ``world_size`` rule can say why nothing fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from planner.layouts import (
    A2A_OFF,
    BoolArray,
    IntArray,
    LayoutBatch,
    a2a_code,
    cp_comm_code,
    dispatcher_code,
)
from planner.model.pipeline import split_layers
from planner.model.pipeline_layout import balanced_layout
from planner.space import comm_flags
from planner.space.memory_axes import (
    MemoryChoices,
    apply_memory_choices,
    attach_balanced_layouts,
)
from planner.space.rules import RULES, check_rules
from planner.space.version_rules import lacks, pin_unavailable
from planner.specs import (
    CP_COMM_TYPES,
    MOE_DISPATCHER_CHOICES,
    OPTIMIZER_SHARDING_CHOICES,
    RECOMPUTE_CHOICES,
    ClusterSpec,
    CpCommType,
    ModelSpec,
    MoeDispatcher,
    OptimizerSharding,
    Recompute,
    SpecError,
    TrainingJob,
)

__all__ = [
    "SearchConstraints",
    "enumerate_layouts",
    "first_violations",
    "rejection_histogram",
]

AxisChoice = int | tuple[int, ...] | None
DEFAULT_OPTIMIZER_SHARDING: tuple[OptimizerSharding, ...] = ("optimizer", "none")
_AXES = ("tp", "pp", "vpp", "cp", "ep", "etp", "micro_batch_size")
_LIMITS = ("max_tp", "max_pp", "max_vpp", "max_cp", "max_ep", "max_micro_batch_size")


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchConstraints:
    """Which layouts to consider. Each axis is None (planner's candidates), a value or a tuple."""

    tp: AxisChoice = None
    pp: AxisChoice = None
    vpp: AxisChoice = None
    cp: AxisChoice = None
    ep: AxisChoice = None
    etp: AxisChoice = None
    micro_batch_size: AxisChoice = None
    max_tp: int | None = None
    """Upper bound on tp; None means gpus_per_node (tp across nodes is legal but slow)."""
    max_pp: int | None = None
    max_vpp: int | None = None
    max_cp: int | None = None
    max_ep: int | None = None
    max_micro_batch_size: int | None = None
    recompute: tuple[Recompute, ...] = RECOMPUTE_CHOICES
    sequence_parallel: tuple[bool, ...] | None = None
    """Allowed values for tp > 1; None means always on (the planner's default)."""
    optimizer_sharding: tuple[OptimizerSharding, ...] = DEFAULT_OPTIMIZER_SHARDING
    """Default: Megatron's distributed optimizer, or none. Full sharding (Torch-FSDP2) is
    opt-in: Megatron supports it with restrictions (rule 58) and no published measurement in
    the calibration data used it, so its predicted speed is the least validated."""
    moe_a2a_overlap: bool | None = None
    """MoE all-to-all overlap: None (the default) searches it on wherever Megatron allows it
    and off (it holds one more layer of activations); False keeps it off, True on."""
    moe_dispatcher: MoeDispatcher | None = None
    """MoE token dispatcher for every candidate: None (the planner's choice per layout),
    'alltoall' or 'flex' (DeepEP)."""
    memory: MemoryChoices = field(default_factory=MemoryChoices)
    """Memory settings of every candidate, and which of them the search varies (issue 13)."""
    cp_comm_type: CpCommType | None = None
    """``--cp-comm-type`` of every cp > 1 candidate: one of CP_COMM_TYPES, or None: the search
    gives each layout the fastest type the rules allow (planner.search.cp_choice)."""

    def __post_init__(self) -> None:
        for name in _AXES:
            for v in self.allowed(name) or ():
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise SpecError(
                        f"{name}={getattr(self, name)!r}: every value must be an integer >= 1",
                        field=name,
                    )
            if getattr(self, name) == ():
                raise SpecError(f"{name}=() allows nothing; leave it unset instead", field=name)
        for name in _LIMITS:
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise SpecError(f"{name}={v!r} must be an integer >= 1 or null", field=name)
        _check_choices("recompute", self.recompute, RECOMPUTE_CHOICES)
        _check_choices("optimizer_sharding", self.optimizer_sharding, OPTIMIZER_SHARDING_CHOICES)
        if self.moe_a2a_overlap is not None and not isinstance(self.moe_a2a_overlap, bool):
            raise SpecError(
                f"moe_a2a_overlap={self.moe_a2a_overlap!r} must be true, false or null (auto)",
                field="moe_a2a_overlap",
            )
        if self.moe_dispatcher is not None and self.moe_dispatcher not in MOE_DISPATCHER_CHOICES:
            raise SpecError(
                f"moe_dispatcher={self.moe_dispatcher!r} is not one of alltoall, flex or null",
                field="moe_dispatcher",
            )
        if self.cp_comm_type is not None and self.cp_comm_type not in CP_COMM_TYPES:
            raise SpecError(
                f"cp_comm_type={self.cp_comm_type!r} is not one of {', '.join(CP_COMM_TYPES)} "
                "or null (the planner searches them)",
                field="cp_comm_type",
            )
        for axis, limit in zip(_AXES[:-2] + _AXES[-1:], _LIMITS, strict=True):
            values, cap = self.allowed(axis), getattr(self, limit)
            if values and cap is not None and min(values) > cap:
                raise SpecError(
                    f"{axis}={getattr(self, axis)!r} leaves nothing at or below {limit}={cap}",
                    field=axis,
                )
        if self.sequence_parallel is not None:
            _check_choices("sequence_parallel", self.sequence_parallel, (True, False))

    def allowed(self, axis: str) -> tuple[int, ...] | None:
        """The user's values for an axis as a tuple, or None when the planner chooses."""
        value = getattr(self, axis)
        if value is None:
            return None
        return (value,) if isinstance(value, int) else tuple(value)


def _check_choices(name: str, values: Sequence[object], choices: Sequence[object]) -> None:
    if not values:
        raise SpecError(f"{name} must allow at least one value", field=name)
    for v in values:
        if v not in choices or isinstance(v, bool) != isinstance(choices[0], bool):
            raise SpecError(
                f"{name}={v!r} is not one of {', '.join(map(repr, choices))}", field=name
            )


def _powers_of_two(limit: int) -> list[int]:
    return [1 << k for k in range(limit.bit_length()) if 1 << k <= limit]


def _divisors(n: int, limit: int | None = None) -> list[int]:
    top = n if limit is None else min(n, limit)
    return [d for d in range(1, top + 1) if n % d == 0]


def _axis(c: SearchConstraints, axis: str, default: list[int], limit: int | None) -> list[int]:
    """The user's values (capped by an explicit max_*) or the defaults (capped by the limit)."""
    values = c.allowed(axis)
    cap = getattr(c, "max_" + axis) if "max_" + axis in _LIMITS else None
    if values is not None:
        return sorted(v for v in set(values) if cap is None or v <= cap)
    bound = cap if cap is not None else limit
    return sorted(v for v in set(default) if bound is None or v <= bound)


def _grid(*sizes: int) -> list[IntArray]:
    """Index columns of the cartesian product of ranges of the given sizes."""
    idx = np.indices(sizes, dtype=np.int64).reshape(len(sizes), -1)
    return [idx[k] for k in range(len(sizes))]


def enumerate_layouts(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    constraints: SearchConstraints | None = None,
) -> LayoutBatch:
    """Every layout within the constraints, as one batch with dp = num_gpus / (tp pp cp)."""
    c = SearchConstraints() if constraints is None else constraints
    w, n_layers = cluster.num_gpus, model.num_layers
    max_tp = c.max_tp if c.max_tp is not None else min(cluster.gpus_per_node, w)
    auto_tp = set(_powers_of_two(max_tp)) | set(_divisors(model.num_attention_heads, max_tp))
    tps = _axis(c, "tp", [t for t in auto_tp if w % t == 0], max_tp)
    split_ok = [
        p
        for p in range(1, min(n_layers, w) + 1)
        if w % p == 0 and split_layers(n_layers, p, 1) is not None
    ]
    pps = _axis(c, "pp", split_ok, w)
    cps = _axis(c, "cp", [x for x in _powers_of_two(w) if w % x == 0], w)
    experts = model.num_experts if model.is_moe else None
    eps = _axis(c, "ep", _divisors(experts, w) if experts else [1], w)
    mbs = _axis(c, "micro_batch_size", _powers_of_two(job.global_batch_size), None)

    # (pp, vpp) pairs: Megatron can split the layers over p x v stages; v > 1 needs p > 1
    pairs: list[tuple[int, int]] = []
    for p in pps:
        if c.memory.pipeline_layout is not None:  # the layout fixes v = stages / p
            v_layout = c.memory.layout_vpp(p)
            pairs += [] if v_layout is None else [(p, v_layout)]
            continue
        splittable = [
            v for v in range(2, n_layers // p + 1) if split_layers(n_layers, p, v) is not None
        ]
        if not splittable and p > 1 and c.memory.auto_pipeline_layout:
            # no standard interleaved split (DeepSeek-V3's 61 layers): balanced explicit layouts
            depth = model.mtp_num_layers
            splittable = [
                v for v in range(2, n_layers // p + 1) if balanced_layout(n_layers, depth, p, v)
            ]
        vs = _axis(c, "vpp", [1, *splittable] if p > 1 else [1], None)
        if p == 1 and 1 in vs:
            vs = [1]
        pairs += [(p, v) for v in vs]
    # (tp, etp, sp) triples: etp in {1, tp} for MoE; sp on iff tp > 1 unless constrained
    sp_choices = (True,) if c.sequence_parallel is None else c.sequence_parallel
    triples: list[tuple[int, int, bool]] = []
    for t in tps:
        etps = _axis(c, "etp", sorted({1, t}), None) if model.is_moe else [t]
        sps = sorted({bool(s) and t > 1 for s in sp_choices})
        triples += [(t, e, s) for e in etps for s in sps]

    tri = np.array(triples, dtype=np.int64).reshape(-1, 3)
    pv = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    cp_arr = np.array(cps, dtype=np.int64)
    i_t, i_p, i_c = _grid(len(tri), len(pv), len(cp_arr))
    mp = tri[i_t, 0] * pv[i_p, 0] * cp_arr[i_c]
    keep = w % mp == 0
    if not keep.any():  # let the world_size rule explain the user's sizes
        keep = np.ones_like(keep)
    i_t, i_p, i_c, mp = i_t[keep], i_p[keep], i_c[keep], mp[keep]

    ep_arr, mb_arr = np.array(eps, dtype=np.int64), np.array(mbs, dtype=np.int64)
    rec_arr = np.array([RECOMPUTE_CHOICES.index(r) for r in c.recompute], dtype=np.int64)
    opt_arr = np.array(
        [OPTIMIZER_SHARDING_CHOICES.index(o) for o in c.optimizer_sharding], dtype=np.int64
    )
    j_m, j_e, j_b, j_r, j_o = _grid(len(mp), len(ep_arr), len(mb_arr), len(rec_arr), len(opt_arr))
    rows_t, rows_p, rows_c = i_t[j_m], i_p[j_m], i_c[j_m]
    batch = LayoutBatch(
        tp=tri[rows_t, 0],
        pp=pv[rows_p, 0],
        vpp=pv[rows_p, 1],
        cp=cp_arr[rows_c],
        ep=ep_arr[j_e],
        etp=tri[rows_t, 1],
        dp=np.maximum(w // mp[j_m], 1),
        micro_batch_size=mb_arr[j_b],
        recompute=rec_arr[j_r],
        sequence_parallel=tri[rows_t, 2].astype(np.bool_),
        optimizer_sharding=opt_arr[j_o],
        moe_a2a_overlap=np.full(len(j_m), a2a_code(c.moe_a2a_overlap), dtype=np.int64),
        moe_dispatcher=np.full(len(j_m), dispatcher_code(c.moe_dispatcher), dtype=np.int64),
    )
    if c.moe_a2a_overlap is None and model.is_moe and not lacks(job, "moe_a2a_overlap", "true"):
        # also search it off where auto turns it on: it costs a layer of activations
        on = comm_flags.allowed(model, cluster, batch, tp_overlap_on=job.tp_comm_overlap)
        off = batch.take(np.flatnonzero(on))
        off = replace(off, moe_a2a_overlap=np.full(len(off), A2A_OFF, dtype=np.int64))
        batch = LayoutBatch.concat([batch, off])
    if c.cp_comm_type is not None:  # None: planner.search.cp_choice picks per layout
        batch = replace(batch, cp_comm_type=np.full(len(batch), cp_comm_code(c.cp_comm_type)))
    batch = apply_memory_choices(model, batch, c.memory)
    if c.moe_a2a_overlap is None:  # drop the off copies where recomputing 'moe' keeps it off
        off_twin = (batch.moe_a2a_overlap == A2A_OFF) & comm_flags.moe_recomputed(batch)
        batch = batch.take(np.flatnonzero(~off_twin))
    if c.memory.pipeline_layout is None and c.memory.auto_pipeline_layout:
        batch = attach_balanced_layouts(model, batch)
    return pin_unavailable(job, batch)  # what the job's Megatron/TE lacks stays off


def first_violations(violated: BoolArray) -> IntArray:
    """Index of the first violated rule per layout, or -1 where none is violated."""
    first: IntArray = np.where(violated.any(axis=1), violated.argmax(axis=1), -1)
    return first


def rejection_histogram(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    violated: BoolArray | None = None,
) -> dict[str, int]:
    """Rule summary -> number of layouts whose first violated rule it is, most common first."""
    if violated is None:
        violated = check_rules(model, cluster, job, batch)
    first = first_violations(violated)
    counts = np.bincount(first[first >= 0], minlength=len(RULES))
    order = sorted(np.flatnonzero(counts), key=lambda j: (-counts[j], j))
    return {RULES[j].summary: int(counts[j]) for j in order}
