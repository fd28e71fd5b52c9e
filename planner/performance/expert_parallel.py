"""Routed-expert work of one MoE layer: grouped expert GEMMs and the per-rank load imbalance.

The expert-parallel terms of the step time. Megatron runs the routed experts of a rank through
TE's ``GroupedLinear`` (``--moe-grouped-gemm``, megatron-facts §1): one cuBLAS GEMM per local
expert on 4 streams by default, or one grouped kernel (the job's ``moe_grouped_gemm_kernel``,
:mod:`planner.performance.moe_compute`). Two things set its speed (performance-facts §5.2, §1.4):

* the size of the whole grouped call (local experts x tokens per expert x n x k), which fills the
  SMs; pricing each expert as a separate small GEMM under-counts large fine-grained MoE badly;
* the tokens per expert m: every expert's weight matrix is streamed from HBM once per call, so at
  small m the GEMM is weight-bandwidth-bound. The roofline knee is m* = plateau x peak x
  bytes-per-weight / (2 x achieved HBM bandwidth) and the efficiency m / sqrt(m^2 + m*^2) blends
  the two limits. With H100 priors (m* ~ 260 bf16, ~ 240 fp8) this reproduces the measured
  expert GEMMs: H100 bf16 (4096, 7168) at m = 128 / 256 / 512: 0.31 / 0.50 / 0.63 of peak
  (§1.4: 0.29 / 0.50 / 0.72), Mixtral experts at 64 / 256 / 1k: 0.17 / 0.50 / 0.69 (gpu_kernels.md:
  0.15 / 0.49 / 0.75), DeepGEMM fp8 at m = 64 / 128: 0.17 / 0.31 (§1.6: 0.15 / 0.27).

Imbalance: ``moe_imbalance`` (busiest expert / mean) multiplies the grouped GEMM and the
all-to-all of every rank as in round 1. A per-rank factor 1 + (x - 1) / sqrt(local experts) was
tried and dropped: the Grok-1 sweeps (2 / 4 / 1 local experts at EP 2 / 4 / 8) got worse with it
(over-prediction grew with local experts), so the data does not support the reduction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layout_settings import MODULE_BITS, effective_modules
from planner.layouts import FloatArray
from planner.model.shapes import Gemm, sharded_width
from planner.performance import overlap
from planner.performance.collectives import all_to_all_time, members_per_node
from planner.performance.context import BF16_BYTES, StepContext
from planner.performance.fp8_recipe_cost import gemm_rate_factor
from planner.performance.moe_compute import GemmRate, expert_mlp_time, permute_sides
from planner.space import comm_flags
from planner.specs import GPUSpec
from planner.stack_settings import effective_kernel
from planner.stack_versions import missing

PERMUTE_HBM_FRACTION = 0.5  # performance-facts §3.1/§5.3: permute/unpermute at 0.5 of HBM spec


def weight_bound_efficiency(tokens_per_expert: FloatArray, knee_tokens: float) -> FloatArray:
    """m / sqrt(m^2 + m*^2): 1 when compute-bound, m / m* when weight-bandwidth-bound."""
    m = np.asarray(tokens_per_expert, np.float64)
    return np.asarray(m / np.sqrt(m * m + knee_tokens * knee_tokens), np.float64)


def grouped_expert_time(
    gemms: tuple[Gemm, ...],
    tokens: FloatArray,
    etp: FloatArray,
    tokens_per_expert: FloatArray,
    local_experts: FloatArray,
    gpu: GPUSpec,
    *,
    plateau: float,
    half_time_s: float,
    fp8: bool,
    hbm_bytes_per_s: float,
) -> FloatArray:
    """Forward seconds of the routed experts' grouped GEMMs on one GPU for ``tokens`` tokens
    (each Gemm's FLOPs per token already count top-k copies; widths sharded by etp)."""
    peak = gpu.peak_fp8_flop_per_s if fp8 and gpu.peak_fp8_flop_per_s else gpu.peak_bf16_flop_per_s
    weight_bytes = 1.0 if fp8 and gpu.peak_fp8_flop_per_s else 2.0
    knee = plateau * peak * weight_bytes / (2.0 * hbm_bytes_per_s)  # roofline knee (docstring)
    m_eff = weight_bound_efficiency(tokens_per_expert, knee)
    total = np.zeros_like(tokens)
    for g in gemms:
        n, k = sharded_width(g, etp.astype(np.int64))
        flop = g.fwd_flop_per_token * tokens / etp
        call = 2.0 * tokens_per_expert * n * k * np.maximum(local_experts, 1.0)
        size = call / (call + half_time_s * peak)
        total = total + flop / (peak * np.maximum(plateau * m_eff * size, 1e-9))
    return np.asarray(total, np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutedParts:
    """One MoE layer's routed work on one GPU in forward units ((forward + backward) / 3), in
    program order after the dispatch sync (:mod:`planner.performance.moe_kernels`)."""

    dispatch: FloatArray
    """Permute 1 and 2 (flex: permute 2), with their share of the row_id_map and kernels."""
    experts: FloatArray
    """The expert GEMMs, load imbalance included."""
    combine: FloatArray
    """Unpermute 2 and 1."""

    @property
    def total(self) -> FloatArray:
        return np.asarray(self.dispatch + self.experts + self.combine, np.float64)


def routed_expert_time(ctx: StepContext) -> FloatArray:
    """Seconds of one MoE layer's routed experts and token permutation on one GPU, in the
    compute term's forward units ((forward + backward) / 3), load imbalance included
    (:func:`routed_expert_parts`)."""
    return routed_expert_parts(ctx).total


def routed_expert_parts(ctx: StepContext) -> RoutedParts:
    """:func:`routed_expert_time` by part (dispatch-side permutes, experts, combine side).

    MoE with tp > 1 needs SP (megatron-facts rule 33), so each GPU routes tokens / t tokens;
    the expert-TP group gathers them (x etp) and every token goes to top-k experts. Expert
    GEMMs run the job's ``moe_grouped_gemm_kernel``: TE's default ``GroupedLinear`` path, one
    cuBLAS GEMM per local expert on 4 streams (mechanisms-facts §4.1: the default on every
    GPU), or one grouped kernel over all local experts (opt-in), at the tokens per expert of
    the busiest rank (x ``moe_imbalance``, the job's routing).
    Permute / unpermute move ~14 K h bytes per token (~8 K h with flex) at the permute kernels'
    share of HBM (§4.4, performance-facts §5.3), plus the fused permute's row_id_map where the
    release has ``--moe-permute-fusion`` (core 0.11 / TE 1.11, §8; the memory side reads the
    same, planner.memory.estimate) and each permute kernel's fixed time.
    """
    model, prof, tp, etp, gpu = ctx.model, ctx.profile, ctx.tp, ctx.etp, ctx.gpu
    e = float(model.num_experts or 1)
    tok_moe = ctx.tokens / tp
    per_expert = tok_moe * etp * ctx.ep * model.moe_router_topk / e
    local_experts = np.maximum(e / ctx.ep, 1.0)
    fp8 = ctx.fp8
    peak = gpu.peak_fp8_flop_per_s if fp8 and gpu.peak_fp8_flop_per_s else gpu.peak_bf16_flop_per_s
    rate = GemmRate(
        peak_flop_per_s=peak,
        # the recipe's stated fp8 rate (blockwise 0.85 of per-tensor: fp8_recipe_cost)
        plateau=prof.fp8_gemm_efficiency * gemm_rate_factor(ctx.fp8_recipe)
        if fp8
        else prof.gemm_efficiency,
        half_tokens=prof.fp8_half_tokens if fp8 else prof.gemm_half_tokens,
        half_flop=(prof.fp8_half_time_s if fp8 else prof.gemm_half_time_s) * peak,
        hbm_bytes_per_s=ctx.hbm_bytes_per_s,
        weight_bytes=1.0 if fp8 else BF16_BYTES,
    )
    fwd = np.zeros_like(tok_moe)
    bwd = np.zeros_like(tok_moe)
    for shard in np.unique(etp).tolist():  # the expert width is split over the expert-TP group
        mask = etp == shard
        f, b = expert_mlp_time(
            rate,
            tokens_per_expert=per_expert,
            local_experts=local_experts,
            hidden=ctx.hidden,
            expert_ffn=model.expert_ffn_hidden_size / shard,
            gated=model.gated_linear_unit,
            path=effective_kernel(ctx.job),  # None: TE default until chosen
            imbalance=ctx.job.moe_imbalance,
        )
        fwd, bwd = np.where(mask, f, fwd), np.where(mask, b, bwd)
    flex = comm_flags.flex_dispatch(model, ctx.cluster, ctx.batch)
    sides = [
        permute_sides(
            tokens=tok_moe,
            hidden=ctx.hidden,
            topk=model.moe_router_topk,
            experts=e,
            dispatcher=kind,
            permute_fusion=missing(ctx.job, "moe_permute_fusion", "true") is None,
            hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s,
            permute_hbm_fraction=PERMUTE_HBM_FRACTION,
        )
        for kind in ("alltoall", "flex")
    ]
    # each side runs once forward and about as long backward (§4.4): 2 / 3 in forward units
    dispatch = np.where(flex, sides[1][0], sides[0][0]) * (2.0 / 3.0)
    combine = np.where(flex, sides[1][1], sides[0][1]) * (2.0 / 3.0)
    return RoutedParts(
        dispatch=np.asarray(dispatch, np.float64),
        experts=np.asarray((fwd + bwd) / 3.0, np.float64),
        combine=np.asarray(combine, np.float64),
    )


def ep_all_to_all_time(
    ctx: StepContext, compute_mb: FloatArray, tp_hidden_mb: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Exposed MoE all-to-all (dispatch + combine per MoE layer, fwd and bwd; §5) per
    micro-batch, and the part the overlap hid, which the bubble runs unhidden.

    ``tp_hidden_mb`` is the TP traffic TE already hides in the compute: the partner
    micro-batch's compute window is shared with it.
    """
    if not ctx.model.is_moe:
        return np.zeros_like(ctx.tokens), np.zeros_like(ctx.tokens)
    model, cluster, batch, prof, links = ctx.model, ctx.cluster, ctx.batch, ctx.profile, ctx.links
    pp, vpp, m, full = ctx.pp, ctx.vpp, ctx.microbatches, ctx.full
    a2a_bytes = ctx.tokens / ctx.tp * model.moe_router_topk * ctx.hidden * BF16_BYTES
    nodes = batch.ep / members_per_node(links, batch.ep, batch.etp)
    dedup = comm_flags.distinct_node_share(nodes, model.moe_router_topk)
    inter_share = np.where(comm_flags.flex_dispatch(model, cluster, batch), dedup, 1.0)
    a2a = all_to_all_time(links, batch.ep, batch.etp, a2a_bytes, inter_share)
    a2a = a2a * ctx.job.moe_imbalance  # and once on the all-to-all
    # a recomputed MoE block ('moe' module) dispatches and combines again in backward (§6.4)
    moe_replay = ((effective_modules(batch) & MODULE_BITS["moe"]) != 0).astype(np.float64)
    a2a_all = (4 + 2 * full + 2 * moe_replay) * ctx.layers_per_stage * ctx.moe_fraction * a2a
    # 1F1B A2A overlap (planner.space.comm_flags): one micro-batch's dispatch/combine runs under
    # the other's compute, so at most that compute hides it. Only steady-state steps have a
    # partner: rank 0 warms up W = 2(p-1) + (v-1)p + 1 virtual micro-batches (megatron-facts
    # §3.3) and cools down as many; at p = 1 that leaves (m-1)/m paired.
    on = comm_flags.enabled(model, cluster, batch, tp_overlap_on=ctx.job.tp_comm_overlap)
    warmup = np.where(batch.pp > 1, 2 * (pp - 1) + (vpp - 1) * pp + 1, 1.0)
    paired = np.maximum(m * vpp - warmup, 0.0) / (m * vpp)
    window = np.maximum(compute_mb - tp_hidden_mb, 0.0)
    ep_hidden = np.where(on, prof.ep_overlap * np.minimum(a2a_all, window) * paired, 0.0)
    ep_mb = (
        a2a_all - ep_hidden + overlap.interference(ctx, ctx.share(batch.ep, batch.etp)) * ep_hidden
    )
    return np.asarray(ep_mb, np.float64), np.asarray(ep_hidden, np.float64)
