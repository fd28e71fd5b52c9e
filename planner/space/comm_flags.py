"""Communication flags the planner emits on its own, and where the models credit them.

``--tp-comm-overlap`` (:func:`tp_comm_overlap`): Transformer Engine's userbuffers.
``--fp8-param-gather`` (:func:`fp8_param_gather`): fp8 weights, gathered in fp8.
``--moe-token-dispatcher-type flex`` with DeepEP (:func:`flex_dispatch`): an expert group that
spans nodes sends each token once per destination node instead of once per chosen expert, and
forwards it inside the node over NVLink (performance-facts §5.1). The planner picks it where the
group spans nodes on Hopper or Blackwell (DeepEP's SM90/SM100 kernels), as NVIDIA's MoE recipes
do; inside one NVLink domain there is nothing to deduplicate and it keeps NCCL's alltoall.

``--overlap-moe-expert-parallel-comm`` (MoE all-to-all overlap). With the flag, Megatron
merges the forward and backward passes of adjacent micro-batches ("1F1B A2A overlap") so that
one micro-batch's expert-parallel dispatch/combine runs while the other computes
(performance-facts §6.4). It comes with ``--delay-wgrad-compute`` and needs
``CUDA_DEVICE_MAX_CONNECTIONS`` > 1. Megatron accepts it only when (megatron-facts rule 40, 16):

* the model has experts and ep > 1, with the alltoall (or flex) dispatcher, which the planner
  always emits;
* no full recompute, and no ``moe`` in ``--recompute-modules`` (a user's setting: with the
  overlap left unset it stays off there, fixed on the rules refuse the pair);
* MTP depth D <= 1;
* an interleaved schedule (vpp > 1) whenever pp > 1.

Before Blackwell the planner also keeps it apart from ``--tp-comm-overlap``: there a layout with
tp > 1 or cp > 1 runs with ``CUDA_DEVICE_MAX_CONNECTIONS=1`` (rule 30), which keeps the TP
collectives ordered for the userbuffers overlap; the A2A overlap needs more than one.
Where a layout leaves it unset (None) it is on wherever allowed, as in NVIDIA's MoE recipes;
False keeps it off (Megatron's default, and what every calibration row ran with).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from planner.layout_settings import FP8_GATHER_AUTO, FP8_GATHER_ON, MODULE_BITS, effective_modules
from planner.layouts import (
    A2A_AUTO,
    A2A_ON,
    DISPATCH_AUTO,
    DISPATCH_FLEX,
    RECOMPUTE_FULL,
    SHARD_NONE,
    BoolArray,
    LayoutBatch,
)
from planner.specs import BLACKWELL_OR_NEWER, ClusterSpec, Layout, ModelSpec, TrainingJob

TP_COMM_OVERLAP_ARCHITECTURES = frozenset({"hopper", "blackwell"})


def tp_comm_overlap(cluster: ClusterSpec, tp: Any, sp: Any) -> Any:
    """Whether ``--tp-comm-overlap`` is emitted, for scalars or arrays of tp and sp.

    Transformer Engine's userbuffers overlap the TP all-gathers and reduce-scatters with the
    GEMMs. They need sequence parallelism (rule 29) and a TP group inside one node's NVLink
    domain; the planner emits them on Hopper and newer, where NVIDIA's recipes use them.
    """
    tp_sizes = np.asarray(tp)
    supported = cluster.gpu.architecture in TP_COMM_OVERLAP_ARCHITECTURES
    return (
        supported
        & (tp_sizes > 1)
        & np.asarray(sp, dtype=np.bool_)
        & (tp_sizes <= cluster.gpus_per_node)
    )


A2A_FLAGS = ("--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute")
CONNECTIONS = "32"
"""CUDA_DEVICE_MAX_CONNECTIONS exported with the overlap (it must be > 1)."""


def fp8_param_gather(precision: str, optimizer_sharding: Any) -> Any:
    """Whether ``--fp8-param-gather`` is emitted (scalars or arrays of sharding codes/names).

    fp8 jobs keep their linear weights in fp8 and all-gather them in fp8, as NVIDIA's fp8
    recipes do; Megatron needs the distributed optimizer or FSDP for it (megatron-facts rule 53).
    The weights then take 1 byte instead of bf16's 2, and the parameter all-gather halves
    (performance-facts §6.1).
    """
    sharding = np.asarray(optimizer_sharding)
    none = SHARD_NONE if sharding.dtype.kind in "iu" else "none"
    return (precision == "fp8") & (sharding != none)


def fp8_gather(job: TrainingJob, batch: LayoutBatch) -> BoolArray:
    """``--fp8-param-gather`` per layout: the field where set, else on for fp8 jobs with the
    distributed optimizer or FSDP (:func:`fp8_param_gather`)."""
    auto = fp8_param_gather(job.precision, batch.optimizer_sharding)
    code = batch.mem.fp8_param_gather
    result: BoolArray = np.where(code == FP8_GATHER_AUTO, auto, code == FP8_GATHER_ON)
    return result & (job.precision == "fp8")


def _pre_blackwell(cluster: ClusterSpec) -> bool:
    return cluster.gpu.architecture not in BLACKWELL_OR_NEWER


def reasons_blocked(
    model: ModelSpec, cluster: ClusterSpec, layout: Layout, *, tp_overlap_on: bool
) -> list[str]:
    """Why the overlap cannot be used with this layout (empty when it can).
    ``tp_overlap_on``: the job's ``tp_comm_overlap`` (off, nothing to conflict with)."""
    lay = layout.normalized()
    out = []
    if not model.is_moe or lay.ep < 2:
        out.append("it needs an MoE model with ep > 1")
    if lay.recompute == "full":
        out.append("full recompute is not allowed with it (use none or selective)")
    if lay.recompute == "selective" and "moe" in (lay.recompute_modules or ()):
        # megatron-facts rule 40: recomputing 'moe' would replay its all-to-all
        out.append("'moe' in recompute_modules is not allowed with it (drop 'moe')")
    if model.mtp_num_layers > 1:
        out.append(f"MTP depth {model.mtp_num_layers} > 1 is not allowed with it")
    if lay.pp > 1 and lay.vpp < 2:
        out.append("with pp > 1 it needs the interleaved schedule (vpp >= 2)")
    if tp_overlap_on and _pre_blackwell(cluster) and bool(tp_comm_overlap(cluster, lay.tp, lay.sp)):
        out.append(
            "before Blackwell the planner does not combine it with the --tp-comm-overlap it "
            "emits for tp > 1 inside a node (that overlap runs with "
            "CUDA_DEVICE_MAX_CONNECTIONS=1, this one needs more); use tp=1"
        )
    return out


def moe_recomputed(batch: LayoutBatch) -> BoolArray:
    """Layouts with ``moe`` in ``--recompute-modules``: Megatron refuses the overlap there
    (megatron-facts rule 40), as recomputing the MoE layer would replay its all-to-all."""
    result: BoolArray = (effective_modules(batch) & MODULE_BITS["moe"]) != 0
    return result


def allowed(
    model: ModelSpec, cluster: ClusterSpec, batch: LayoutBatch, *, tp_overlap_on: bool
) -> BoolArray:
    """Where Megatron (and the planner's other flags) allow the overlap. ``tp_overlap_on`` is
    the job's ``tp_comm_overlap``: a job that turns it off emits no ``--tp-comm-overlap``
    (planner.megatron.flags), so nothing holds CUDA_DEVICE_MAX_CONNECTIONS at 1 and 'auto'
    turns the overlap on there too. Every caller passes the job's setting (memory, time, rules
    and flags agree on it)."""
    if not model.is_moe or model.mtp_num_layers > 1:
        return np.zeros(len(batch), dtype=np.bool_)
    ok = (batch.ep > 1) & (batch.recompute != RECOMPUTE_FULL)
    ok &= ~moe_recomputed(batch)
    ok &= (batch.pp == 1) | (batch.vpp > 1)
    if tp_overlap_on and _pre_blackwell(cluster):
        ok &= ~np.asarray(tp_comm_overlap(cluster, batch.tp, batch.sequence_parallel), np.bool_)
    return np.asarray(ok, dtype=np.bool_)


class JobLayouts(Protocol):
    """What a rule sees: the model, cluster and job, and a batch of layouts (read-only)."""

    @property
    def model(self) -> ModelSpec: ...
    @property
    def cluster(self) -> ClusterSpec: ...
    @property
    def job(self) -> TrainingJob: ...
    @property
    def batch(self) -> LayoutBatch: ...


def allowed_for(ctx: JobLayouts) -> BoolArray:
    """:func:`allowed` under the job's own ``tp_comm_overlap`` (the rules' view)."""
    return allowed(ctx.model, ctx.cluster, ctx.batch, tp_overlap_on=ctx.job.tp_comm_overlap)


def reasons_for(ctx: JobLayouts, i: int) -> list[str]:
    """:func:`reasons_blocked` of the batch's layout ``i`` under the job's TP overlap."""
    layout = ctx.batch.layout(i)
    return reasons_blocked(ctx.model, ctx.cluster, layout, tp_overlap_on=ctx.job.tp_comm_overlap)


def enabled(
    model: ModelSpec, cluster: ClusterSpec, batch: LayoutBatch, *, tp_overlap_on: bool
) -> BoolArray:
    """Whether each layout runs with the overlap: auto -> where allowed (under the job's
    ``tp_comm_overlap``, ``tp_overlap_on``), else as requested."""
    request = batch.moe_a2a_overlap
    auto = allowed(model, cluster, batch, tp_overlap_on=tp_overlap_on)
    return np.where(request == A2A_AUTO, auto, request == A2A_ON)


DEEPEP_ARCHITECTURES = frozenset({"hopper", "blackwell"})


def flex_allowed(model: ModelSpec, cluster: ClusterSpec, batch: LayoutBatch) -> BoolArray:
    """Where the DeepEP dispatcher can run: MoE with ep > 1 on NVIDIA Hopper or Blackwell."""
    gpu = cluster.gpu
    if not model.is_moe or gpu.vendor != "nvidia" or gpu.architecture not in DEEPEP_ARCHITECTURES:
        return np.zeros(len(batch), dtype=np.bool_)
    return np.asarray(batch.ep > 1, dtype=np.bool_)


def flex_dispatch(model: ModelSpec, cluster: ClusterSpec, batch: LayoutBatch) -> BoolArray:
    """Whether each layout dispatches with DeepEP: auto -> where its expert group spans nodes."""
    request = batch.moe_dispatcher
    spans = batch.ep * batch.etp > cluster.gpus_per_node
    auto = flex_allowed(model, cluster, batch) & spans
    return np.asarray(np.where(request == DISPATCH_AUTO, auto, request == DISPATCH_FLEX))


def distinct_node_share(nodes: Any, topk: int) -> Any:
    """Copies a token needs across nodes with deduplication, per copy without it.

    A token picks ``topk`` experts spread evenly over ``nodes`` nodes: it reaches
    nodes x (1 - (1 - 1/nodes)^topk) distinct nodes on average, instead of one send per expert.
    """
    r = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    return r * (1.0 - (1.0 - 1.0 / r) ** topk) / topk


def resolve(
    model: ModelSpec, cluster: ClusterSpec, layout: Layout, *, tp_overlap_on: bool
) -> Layout:
    """The layout with ``moe_a2a_overlap`` and ``moe_dispatcher`` made explicit (False and None
    for dense models); ``tp_overlap_on``: the job's ``tp_comm_overlap``."""
    lay = layout.normalized()
    if not model.is_moe and lay.moe_dispatcher is not None:
        # a dispatcher pinned for an old release (version_rules) means nothing without experts
        lay = replace(lay, moe_dispatcher=None)
    if lay.moe_a2a_overlap is not None and (lay.moe_dispatcher is not None or not model.is_moe):
        return lay  # already explicit (resolving twice is free)
    batch = LayoutBatch.from_layouts([lay])
    values = lay.to_dict()
    if lay.moe_a2a_overlap is None:
        values["moe_a2a_overlap"] = bool(
            enabled(model, cluster, batch, tp_overlap_on=tp_overlap_on)[0]
        )
    if lay.moe_dispatcher is None and model.is_moe:
        values["moe_dispatcher"] = "flex" if flex_dispatch(model, cluster, batch)[0] else "alltoall"
    return Layout(**values)
