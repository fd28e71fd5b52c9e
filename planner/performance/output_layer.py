"""The output layer on the loss rank: its TP collectives and its host launches.

The last pipeline stage (or the 'L' stage of ``--pipeline-model-parallel-layout``) runs the final
norm, the output layer (Megatron's ``ColumnParallelLinear``, vocabulary split over TP) and the
loss; each of the D MTP depths adds its own output layer and loss (mechanisms-facts §5.1), so the
loss rank runs 1 + D heads per micro-batch.

Collectives of one head, on the same message-size curves as the layers' TP traffic
(:func:`planner.performance.collectives.ring_time`, one s_l b h message):

* forward, with SP: the hidden input is all-gathered first (§5.1). Nothing runs beside it: the
  final norm before it is its input, the logit GEMM after it needs the gathered rows. It stays
  exposed with ``--tp-comm-overlap`` too: the userbuffers are Transformer Engine's and overlap
  the AG/RS of TE's linears with their GEMMs (performance-facts §6.2), and the output layer is
  Megatron's own ``ColumnParallelLinear`` (§5.1), not a TE module [inferred: the facts list no
  output-layer buffer].
* backward, with SP: the input-gradient reduce-scatter (and the re-gather of the input the
  forward saved sharded for the weight gradient); without SP the input-gradient all-reduce.
  Megatron launches them asynchronously, the gather before the dgrad GEMM and the reduce-scatter
  (or all-reduce) before the wgrad GEMM, each as large as the forward logit GEMM [inferred: MLM
  ``tensor_parallel/layers.py``, ``LinearWithGradAccumulationAndAsyncCommunication.backward``,
  relying on CUDA_DEVICE_MAX_CONNECTIONS=1]: only what outlasts its GEMM is exposed, and the
  hidden part steals compute as every hidden collective does (:mod:`.overlap`).

Host launches of one head (mechanisms-facts §3.2 counts, written out for the head the way they
are for a layer): the norm, the gather and the GEMM forward, their backward, and the loss's
kernels (:data:`planner.performance.cross_entropy.CROSS_ENTROPY_PASSES`). Per-layer CUDA graphs
capture transformer layers or their sub-modules (§3.4), so the heads stay eager under
``partial`` and are captured only by ``full_iteration``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray
from planner.performance import overlap
from planner.performance.collectives import ring_time
from planner.performance.compute import logits_time
from planner.performance.context import StepContext
from planner.performance.cross_entropy import cross_entropy_passes
from planner.stack_settings import loss_kernel

__all__ = ["OutputLayerComm", "head_kernels", "heads", "output_layer_comm"]

HEAD_FWD_KERNELS = 2  # final norm, logit GEMM [inferred from the §3.2 layer counts]
HEAD_BWD_KERNELS = 3  # dgrad GEMM, wgrad GEMM, norm backward
HEAD_TP_FWD_KERNELS_SP = 1  # the input all-gather (SP)
HEAD_TP_BWD_KERNELS_SP = 2  # the input re-gather and the gradient reduce-scatter (SP)
HEAD_TP_BWD_KERNELS = 1  # the gradient all-reduce (TP without SP)


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputLayerComm:
    """TP seconds of one head (output layer) for one micro-batch on the loss rank."""

    fwd_s: FloatArray
    """The exposed forward all-gather (SP), zero without SP or TP."""
    bwd_s: FloatArray
    """What of the backward collectives outlasts the GEMM it runs under, plus their
    interference with that GEMM."""

    @property
    def exposed_s(self) -> FloatArray:
        return np.asarray(self.fwd_s + self.bwd_s, np.float64)


def heads(ctx: StepContext) -> float:
    """Output layers and losses on the loss rank: the main head and one per MTP depth (§5.1)."""
    return 1.0 + float(ctx.shapes.mtp_layers)


def output_layer_comm(ctx: StepContext) -> OutputLayerComm:
    """TP collectives of one head for one micro-batch (module docstring)."""
    links, tp, act = ctx.links, ctx.batch.tp, ctx.activation_bytes
    one = np.ones_like(tp)
    sp = ctx.sp > 0
    # mechanisms-facts §5.1: with SP the head's s_l b h input is all-gathered over TP first
    gather = ring_time(links, tp, one, act, 1.0, op="all_gather")
    scatter = ring_time(links, tp, one, act, 1.0, op="reduce_scatter")
    reduce = ring_time(links, tp, one, act, 2.0)
    gemm = logits_time(ctx)  # the dgrad and the wgrad GEMM each match the forward's FLOPs
    # SP: re-gather under dgrad, reduce-scatter under wgrad; no SP: all-reduce under wgrad
    under_dgrad = np.where(sp, gather, 0.0)
    under_wgrad = np.where(sp, scatter, reduce)
    exposed = np.maximum(under_dgrad - gemm, 0.0) + np.maximum(under_wgrad - gemm, 0.0)
    hidden = under_dgrad + under_wgrad - exposed
    steal = overlap.interference(ctx, ctx.share(tp, one))
    return OutputLayerComm(
        fwd_s=np.asarray(np.where(sp, gather, 0.0), np.float64),
        bwd_s=np.asarray(exposed + steal * hidden, np.float64),
    )


def head_kernels(ctx: StepContext) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) eager kernel launches of one head: norm, gather, GEMMs, the loss."""
    ce = cross_entropy_passes(loss_kernel(ctx.job))
    has_tp, sp = ctx.tp > 1, ctx.sp > 0
    fwd = HEAD_FWD_KERNELS + ce.kernels_fwd + np.where(has_tp & sp, HEAD_TP_FWD_KERNELS_SP, 0)
    tp_bwd = np.where(sp, HEAD_TP_BWD_KERNELS_SP, HEAD_TP_BWD_KERNELS)
    bwd = HEAD_BWD_KERNELS + ce.kernels_bwd + np.where(has_tp, tp_bwd, 0)
    return np.asarray(fwd, np.float64), np.asarray(bwd, np.float64)
