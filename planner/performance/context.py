"""What every term of the step time reads: the layouts, the job, the links and derived shapes.

:func:`step_context` derives it once per :class:`LayoutBatch`; each term of the throughput model
(one module per term in this package) is a function of it and of the terms it depends on, and
:mod:`planner.performance.step_time` adds them up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.fp8_recipes import effective_recipe
from planner.layouts import FloatArray, IntArray, LayoutBatch
from planner.model.flops import padded_vocab
from planner.model.pipeline import stage_layers
from planner.model.pipeline_layout import layout_rank_layers
from planner.model.shapes import LayerShapes, layer_shapes
from planner.performance.collectives import Links, link_share
from planner.performance.profile import PerformanceProfile
from planner.space.version_rules import split_lacking
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, TrainingJob

BF16_BYTES = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """The inputs of one step-time estimate, as float arrays with one entry per layout."""

    model: ModelSpec
    cluster: ClusterSpec
    job: TrainingJob
    batch: LayoutBatch
    profile: PerformanceProfile
    shapes: LayerShapes
    fp8: bool
    """The job runs fp8 and the GPU has fp8 tensor cores."""
    fp8_recipe: str | None
    """The recipe an fp8 job runs (its own or the planner's, planner.fp8_recipes); None: bf16."""
    tp: FloatArray
    pp: FloatArray
    vpp: FloatArray
    cp: FloatArray
    ep: FloatArray
    etp: FloatArray
    dp: FloatArray
    sp: FloatArray
    """1.0 where sequence parallelism is on."""
    full: FloatArray
    """1.0 where every layer is recomputed (full recompute)."""
    seq: float
    hidden: float
    microbatches: FloatArray
    """Micro-batches per step, m = global batch / (b x dp)."""
    tokens: FloatArray
    """Tokens of one micro-batch on one GPU (the GEMMs' m after the SP gather): b s / cp."""
    activation_bytes: FloatArray
    """One micro-batch's hidden states on one GPU in bf16: tokens x h x 2 bytes."""
    links: Links
    hbm_bytes_per_s: float
    """Achieved HBM bandwidth (datasheet x the profile's hbm_efficiency)."""
    layers_per_stage: FloatArray
    """Decoder layers on the busiest pipeline rank."""
    last_layers: FloatArray
    """Decoder layers on the last rank, which also runs the output layer and the loss."""
    mtp_rank_layers: FloatArray
    """Decoder layers on the rank that runs the MTP layers (the last rank unless a pipeline
    layout puts them on another: ``mtp_on_last`` False)."""
    mtp_on_last: FloatArray
    """1.0 where the MTP layers run on the last rank."""
    moe_fraction: float
    """Share of the decoder layers that are MoE layers."""
    vocab: FloatArray
    """Padded vocabulary per layout (grows with tp)."""

    @property
    def gpu(self) -> GPUSpec:
        return self.cluster.gpu

    def share(self, size: IntArray, stride: IntArray) -> FloatArray:
        """Share of the link a group's collective loads (:func:`link_share`)."""
        return link_share(self.links, size, stride)


def step_context(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    profile: PerformanceProfile,
) -> StepContext:
    """Derive the per-layout arrays every term of the throughput model reads."""
    gpu = cluster.gpu
    f = np.float64
    sh = layer_shapes(model)
    b = batch.micro_batch_size.astype(f)
    dp, cp = batch.dp.astype(f), batch.cp.astype(f)
    seq, hidden = float(job.seq_length), float(model.hidden_size)
    tokens = b * seq / cp
    layers = stage_layers(model, batch, split_lacking(job))  # the release's split (§7)
    # --pipeline-model-parallel-layout, where given, sets each rank's layers
    ranks = layout_rank_layers(batch, layers.busiest, layers.last)
    tp = batch.tp.astype(f)
    return StepContext(
        model=model,
        cluster=cluster,
        job=job,
        batch=batch,
        profile=profile,
        shapes=sh,
        fp8=job.precision == "fp8" and gpu.peak_fp8_flop_per_s is not None,
        fp8_recipe=effective_recipe(job, gpu),
        tp=tp,
        pp=batch.pp.astype(f),
        vpp=batch.vpp.astype(f),
        cp=cp,
        ep=batch.ep.astype(f),
        etp=batch.etp.astype(f),
        dp=dp,
        sp=batch.sequence_parallel.astype(f),
        full=(batch.recompute == 2).astype(f),
        seq=seq,
        hidden=hidden,
        microbatches=np.maximum(job.global_batch_size / np.maximum(b * dp, 1.0), 1.0),
        tokens=tokens,
        activation_bytes=tokens * hidden * BF16_BYTES,
        links=Links(
            gpus_per_node=cluster.gpus_per_node,
            nvlink_busbw_bytes_per_s=gpu.intra_node_bandwidth_bytes_per_s
            * profile.nvlink_efficiency,
            nic_busbw_bytes_per_s=cluster.inter_node_bandwidth_bytes_per_s
            * profile.network_efficiency,
            intra_latency_s=profile.intra_latency_s,
            inter_latency_s=profile.inter_latency_s,
            table=gpu.collectives,
            network_bytes_per_s=cluster.inter_node_bandwidth_bytes_per_s,
            # an all-to-all or a send/recv cannot pool NICs: one NIC at most (performance-facts
            # §4.2), the GPU's share of one where a NIC serves several GPUs
            single_nic_bytes_per_s=cluster.inter_node_bandwidth_bytes_per_s
            / max(cluster.nics_per_gpu, 1.0),
            mesh=cluster.intra_node_topology == "mesh",
        ),
        hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s * profile.hbm_efficiency,
        layers_per_stage=ranks.busiest,
        last_layers=ranks.last,
        mtp_rank_layers=ranks.mtp,
        mtp_on_last=ranks.mtp_on_last.astype(f),
        moe_fraction=sh.num_moe_layers / float(model.num_layers),
        vocab=padded_vocab(model, tp),
    )
