"""The throughput model: step time of Megatron-LM training for a batch of layouts.

Shape from physics, a few dimensionless coefficients from measurements (ARCHITECTURE.md
"Performance model", performance-facts §9). One step of the slowest (last) pipeline stage is

    m x (compute + recompute + exposed TP/CP/EP comm + exposed PP p2p + per-micro-batch overhead)
    + bubble ((p-1)/v of one micro-batch's stage time, megatron-facts §6)
    + exposed DP gradient reduce-scatter / parameter all-gather (+ the last bucket)
    + optimizer step (memory-bound Adam over the local shard) + per-step overhead
    + straggler (the GPU-bound parts run at the pace of the slowest of the job's N GPUs),

and every term is returned in ``breakdown`` so that the parts sum to ``step_time_s``. Each
term is one function in the module of its name: :func:`~planner.performance.compute.compute_time`
and ``recompute_time``, :func:`~planner.performance.tensor_parallel.tp_comm_time`,
:func:`~planner.performance.context_parallel.cp_comm_time`,
:func:`~planner.performance.expert_parallel.ep_all_to_all_time`,
:func:`~planner.performance.pipeline.pp_p2p_time` and ``pipeline_bubble``,
:func:`~planner.performance.data_parallel.dp_comm_time`,
:func:`~planner.performance.optimizer.optimizer_step_time`,
:func:`~planner.performance.straggler.straggler_time`, and the interference of hidden traffic
(:func:`~planner.performance.overlap.interference`); the memory settings' replays, host optimizer
and activation offload in :mod:`planner.performance.memory_settings`.

Issue 12 mechanisms in the terms: collectives on the GPU's bandwidth-vs-size curves
(:mod:`~planner.performance.collectives`), the CP ring attention step by step
(:mod:`~planner.performance.context_parallel`), host launches / MoE dispatch syncs / CUDA
graphs as the per-micro-batch overhead (:mod:`~planner.performance.host_term`), expert GEMMs
per expert on TE's streams with their permutation (``expert_parallel.routed_expert_time``).

Conventions: ``model_tflops_per_gpu`` uses Megatron's model-FLOPs formula (megatron-facts §5,
vocabulary padded by each layout's tp, no recompute factor). ``mfu`` divides that by the GPU's
dense **bf16** peak even for fp8 jobs, so that MFUs of bf16 and fp8 runs compare (NVIDIA's
dgxc tables divide fp8 runs by the fp8 peak instead, see ``shared/data/README.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray, LayoutBatch
from planner.model.flops import flops_per_iteration
from planner.performance.compute import ComputeTimes, compute_time, recompute_time
from planner.performance.context import StepContext, step_context
from planner.performance.context_parallel import cp_comm_time, ring_model
from planner.performance.data_parallel import dp_comm_time, stage_param_counts
from planner.performance.expert_parallel import ep_all_to_all_time
from planner.performance.host_term import host_exposed_time, step_host_seconds
from planner.performance.memory_settings import activation_offload_time
from planner.performance.offload_time import module_offload_time
from planner.performance.optimizer import optimizer_step_time
from planner.performance.pipeline import pipeline_bubble, pp_p2p_time
from planner.performance.profile import PerformanceProfile as PerformanceProfile  # re-exported
from planner.performance.profile import default_profile as default_profile  # re-exported
from planner.performance.straggler import straggler_time
from planner.performance.tensor_parallel import TensorParallelComm, tp_comm_time
from planner.specs import ClusterSpec, ModelSpec, TrainingJob

BREAKDOWN_KEYS = (
    "compute_s",
    "recompute_s",
    "tp_comm_s",
    "cp_comm_s",
    "ep_comm_s",
    "pp_comm_s",
    "dp_comm_s",
    "bubble_s",
    "optimizer_s",
    "offload_s",
    "overhead_s",
    "straggler_s",
)


@dataclass(frozen=True, slots=True)
class PerformanceEstimate:
    """Per-layout step time and throughput, with the exposed seconds of each part."""

    step_time_s: FloatArray
    tokens_per_s_per_gpu: FloatArray
    model_tflops_per_gpu: FloatArray
    mfu: FloatArray
    """Model FLOPs / (step time x GPUs x dense bf16 peak), whatever the job's precision."""
    breakdown: dict[str, FloatArray]


@dataclass(frozen=True, slots=True)
class StageGpuTime:
    """One micro-batch of the busiest stage on the GPU, by term (before host costs)."""

    compute: ComputeTimes
    recompute_mb: FloatArray
    tp: TensorParallelComm
    cp_mb: FloatArray
    ep_mb: FloatArray
    ep_unhidden: FloatArray
    """EP traffic the overlap hid, which the bubble runs unhidden."""
    gpu_mb: FloatArray
    """compute + recompute + exposed TP, CP and EP communication."""


def stage_gpu_time(ctx: StepContext) -> StageGpuTime:
    """The GPU terms of one micro-batch (also what bench.mechanisms_host anchors)."""
    ring = ring_model(ctx)  # CP ring attention step by step (context_parallel), or None
    compute = compute_time(ctx, ring)
    recompute_mb = recompute_time(ctx, compute)
    tp = tp_comm_time(ctx)
    cp_mb = cp_comm_time(ctx, compute.core, ring)
    ep_mb, ep_unhidden = ep_all_to_all_time(ctx, compute.compute_mb, tp.hidden_mb)
    gpu_mb = compute.compute_mb + recompute_mb + tp.exposed_mb + cp_mb + ep_mb
    return StageGpuTime(compute, recompute_mb, tp, cp_mb, ep_mb, ep_unhidden, gpu_mb)


def estimate_performance(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    profile: PerformanceProfile,
) -> PerformanceEstimate:
    """Step time, tokens/s per GPU, model TFLOP/s per GPU, MFU and the breakdown per layout."""
    ctx = step_context(model, cluster, job, batch, profile)
    m, f = ctx.microbatches, np.float64
    g = stage_gpu_time(ctx)
    compute, compute_mb, recompute_mb, tp = g.compute, g.compute.compute_mb, g.recompute_mb, g.tp
    cp_mb, ep_mb, ep_unhidden, gpu_mb = g.cp_mb, g.ep_mb, g.ep_unhidden, g.gpu_mb
    pp_mb = pp_p2p_time(ctx)
    # host launches, MoE dispatch syncs and CUDA graphs (host_term, mechanisms-facts §3)
    overhead_mb = (
        host_exposed_time(
            ctx,
            gpu_mb,
            moe_block_fwd=compute.replay.moe_block,
            ep_mb=ep_mb,
            replay=(compute.replay, recompute_mb),
        )
        + (ctx.layers_per_stage + ctx.shapes.mtp_layers) * profile.layer_overhead_s
    )
    stage_mb = gpu_mb + pp_mb + overhead_mb
    params = stage_param_counts(ctx)
    gpus = ctx.tp * ctx.pp * ctx.cp * ctx.dp
    breakdown = {
        "compute_s": m * compute_mb,
        "recompute_s": m * recompute_mb,
        "tp_comm_s": m * tp.exposed_mb,
        "cp_comm_s": m * cp_mb,
        "ep_comm_s": m * ep_mb,
        "pp_comm_s": m * pp_mb,
        "dp_comm_s": dp_comm_time(ctx, compute_mb, params),
        "bubble_s": pipeline_bubble(ctx, stage_mb, ep_unhidden),
        "optimizer_s": optimizer_step_time(ctx, params),
        "offload_s": m * activation_offload_time(ctx, compute_mb)
        + m * module_offload_time(ctx, compute),
        "overhead_s": m * overhead_mb + profile.step_overhead_s + step_host_seconds(ctx),
        "straggler_s": straggler_time(ctx, compute_mb + recompute_mb, gpus),
    }
    # the cluster's level (profile.cluster_step_scale): every part scaled alike, so the parts
    # still sum to the step time
    breakdown = {k: np.asarray(v, f) * profile.cluster_step_scale for k, v in breakdown.items()}
    step = np.zeros_like(ctx.tokens)
    for value in breakdown.values():
        step = step + value
    tokens_per_s = job.global_batch_size * ctx.seq / (step * gpus)
    flops = flops_per_iteration(model, job, batch)  # Megatron's formula (megatron-facts §5)
    tflops = flops / (step * gpus) / 1e12
    return PerformanceEstimate(
        step_time_s=step,
        tokens_per_s_per_gpu=np.asarray(tokens_per_s, f),
        model_tflops_per_gpu=np.asarray(tflops, f),
        mfu=np.asarray(tflops * 1e12 / cluster.gpu.peak_bf16_flop_per_s, f),
        breakdown=breakdown,
    )
