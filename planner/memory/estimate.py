"""Per-GPU memory of a Megatron-LM training step and the 80 % rule, vectorised over layouts.

Starts from Fujii et al.'s estimator (memory-estimator-fujii) and Megatron's theoretical memory
report (megatron-facts §4, §7) and goes past both: the first AND the last pipeline rank are
evaluated (embedding + p in-flight micro-batches versus output layer + fp32 logits), MoE expert
weights and routed-token activations, MLA, recompute none/selective/full, Torch-FSDP2-style full
sharding as well as the distributed optimizer, fp8 weight copies, and explicit terms for
communication buffers and the CUDA/NCCL runtime. A layout fits when the most loaded rank's total
is at most ``threshold`` x HBM (Fujii §6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from planner.layouts import (
    RECOMPUTE_FULL,
    RECOMPUTE_SELECTIVE,
    SHARD_FULL,
    SHARD_NONE,
    BoolArray,
    FloatArray,
    IntArray,
    LayoutBatch,
)
from planner.memory.activations import (
    BF16,
    FP32,
    ActivationShape,
    LayerActivations,
    backward_workspace,
    layer_activations,
    routed_tokens,
)
from planner.memory.stages import StageParams, in_flight_microbatches, stage_params
from planner.model.flops import padded_vocab
from planner.model.params import param_counts
from planner.model.pipeline import stage_layers
from planner.space import comm_flags as overlap
from planner.specs import ClusterSpec, ModelSpec, SpecError, TrainingJob

GIB = float(2**30)

TERM_NAMES: tuple[str, ...] = (
    "weights_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "fp8_bytes",
    "activations_bytes",
    "embedding_input_bytes",
    "logits_bytes",
    "workspace_bytes",
    "comm_buffers_bytes",
    "fragmentation_bytes",
    "runtime_overhead_bytes",
)
"""Keys of :attr:`MemoryEstimate.terms`, in display order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOptions:
    """Switches and physical constants of the estimator (defaults: Megatron-Core + TE, bf16)."""

    threshold: float = 0.8
    """A layout fits when total <= threshold x HBM (Fujii §6: no OOM below 80 %)."""
    param_dtype_bytes: int = 2
    """bf16 model weights."""
    grad_dtype_bytes: int = 4
    """fp32 main gradients (--accumulate-allreduce-grads-in-fp32, Megatron's bf16 default)."""
    optimizer_state_bytes: int = 12
    """fp32 master weights + Adam m + Adam v (megatron-facts §4.3)."""
    swiglu_fused: bool = True
    """Megatron's fused bias-SwiGLU keeps only FC1's output; False also counts the SiLU output,
    as Fujii's Eq. 12 does (4 x 2sbF instead of 3 x 2sbF)."""
    flash_attention: bool = True
    """TE flash/fused attention: no s^2 tensors are saved (Korthikanti's 5as^2b vanishes)."""
    embedding_input: Literal["token_ids", "fujii"] = "token_ids"
    """'token_ids': int64 input and position ids per in-flight micro-batch (16 s b bytes);
    'fujii': the paper's conservative 8 s b h p / (t c) (memory-estimator-fujii §5.3)."""
    moe_token_imbalance: float = 1.2
    """Most loaded EP rank's routed tokens over the mean; aux-loss-balanced dropless routing
    stays within about 20 % once training is under way."""
    cuda_context_bytes: float = 0.5 * GIB
    """CUDA context and loaded kernels (memory-estimator-fujii §7, S7: 0.3-0.5 GB)."""
    library_workspace_bytes: float = 0.25 * GIB
    """cuBLAS/cuBLASLt and TE workspaces (32 MiB per stream on Hopper, a few streams)."""
    nccl_bytes_per_communicator: float = 0.5e9
    """NCCL buffers per communicator of size > 1 (memory-estimator-fujii §7, S7: about 0.5 GB)."""
    dp_bucket_bytes: float = 0.0
    """Gradient-reduction and parameter-gather buckets held outside the gradient buffer. 0 for
    Megatron-Core, whose buckets are views of the contiguous grad/param buffers (in place);
    DeepSpeed ZeRO-1 allocates reduce and all-gather buckets (2 x 5e8 elements by default)."""
    keep_stage_outputs: bool = False
    """False for Megatron, which frees each pipeline stage's output tensor once it is sent
    (deallocate_output_tensor); DeepSpeed's pipeline engine keeps it (2sbh per in-flight
    micro-batch) until the backward pass."""
    fragmentation_fraction: float = 0.1
    """Caching-allocator blocks reserved but unusable, as a fraction of the dynamic
    (per-step) memory: activations, logits, workspaces and buffers."""
    include_runtime_overhead: bool = True
    """False drops the CUDA/NCCL/library and fragmentation terms (Fujii's paper scope)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise SpecError(
                f"threshold={self.threshold} must be in (0, 1]; 0.8 is the 80 % rule",
                field="threshold",
            )
        if self.embedding_input not in ("token_ids", "fujii"):
            raise SpecError(
                f"embedding_input={self.embedding_input!r}: use 'token_ids' or 'fujii'",
                field="embedding_input",
            )
        if self.moe_token_imbalance < 1.0 or self.fragmentation_fraction < 0.0:
            raise SpecError(
                "moe_token_imbalance must be >= 1 and fragmentation_fraction >= 0",
                field="moe_token_imbalance",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    """Bytes per GPU for n layouts (arrays of length n)."""

    terms: dict[str, FloatArray]
    """Each term for the most loaded rank (see :data:`TERM_NAMES`)."""
    first_stage_terms: dict[str, FloatArray]
    last_stage_terms: dict[str, FloatArray]
    first_stage_bytes: FloatArray
    last_stage_bytes: FloatArray
    total_bytes: FloatArray
    """max(first, last)."""
    worst_stage: IntArray
    """0 = first rank, 1 = last rank."""
    capacity_bytes: float
    threshold: float
    fits: BoolArray
    """total_bytes <= threshold x capacity_bytes."""
    stage_params: dict[str, FloatArray] = field(default_factory=dict)
    """Parameters per GPU: first_dense, first_expert, last_dense, last_expert."""


def _states(
    params: StageParams, batch: LayoutBatch, options: MemoryOptions
) -> dict[str, FloatArray]:
    """Weights, gradients and optimizer state (megatron-facts §4.3, Fujii §4)."""
    dense_shard = (batch.dp * batch.cp).astype(np.float64)  # dist-opt shards over d*c (§3.1)
    expert_shard = np.maximum(batch.expert_dp, 1).astype(np.float64)
    mode = batch.optimizer_sharding
    sharded = params.dense / dense_shard + params.expert / expert_shard
    whole = params.dense + params.expert
    full = mode == SHARD_FULL
    held = np.where(full, sharded, whole)  # Torch-FSDP2 shards weights and grads too
    return {
        "weights_bytes": options.param_dtype_bytes * held,
        "gradients_bytes": options.grad_dtype_bytes * held,
        # 18 B/param without sharding, 6 + 12/(d c) with the distributed optimizer (§4.3)
        "optimizer_bytes": options.optimizer_state_bytes
        * np.where(mode == SHARD_NONE, whole, sharded),
    }


def _saved_per_layer(acts: LayerActivations, recompute: IntArray) -> FloatArray:
    full = acts.full
    selective = full - acts.core_attention  # core_attn is Megatron's default module (§1.6)
    result: FloatArray = np.where(
        recompute == RECOMPUTE_FULL,
        acts.layer_input,
        np.where(recompute == RECOMPUTE_SELECTIVE, selective, full),
    )
    return result


def _communicators(model: ModelSpec, batch: LayoutBatch) -> FloatArray:
    """NCCL communicators of size > 1 one GPU belongs to (TP, CP, DP x CP, PP, EP, expert DP)."""
    count = (
        (batch.tp > 1).astype(np.float64)
        + (batch.cp > 1)
        + (batch.dp * batch.cp > 1)
        + ((batch.dp > 1) & (batch.cp > 1))
        + (batch.pp > 1)
    )
    if model.is_moe:
        count = count + (batch.ep > 1) + (batch.expert_dp > 1) + (batch.etp != batch.tp)
    result: FloatArray = count
    return result


def estimate_memory(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    options: MemoryOptions | None = None,
) -> MemoryEstimate:
    """Per-GPU peak bytes of the first and last pipeline rank for every layout in ``batch``."""
    opts = options or MemoryOptions()
    counts = param_counts(model, seq_length=job.seq_length)
    layers = stage_layers(model, batch)
    first_params, last_params = stage_params(model, counts, batch, layers)
    first = _states(first_params, batch, opts)
    last = _states(last_params, batch, opts)
    if job.precision == "fp8":
        # TE keeps an fp8 copy and an fp8 transpose of every linear weight (1 + 1 bytes); with
        # --fp8-param-gather the fp8 weight is the model weight (1 byte instead of bf16's 2)
        # and only the transpose comes on top (FSDP's sharded weights are left as they are)
        gather = overlap.fp8_param_gather(job.precision, batch.optimizer_sharding)
        for terms, params in ((first, first_params), (last, last_params)):
            terms["fp8_bytes"] = np.where(gather, 1.0, 2.0) * params.fp8_linear
            dist_opt = gather & (batch.optimizer_sharding != SHARD_FULL)
            terms["weights_bytes"] = terms["weights_bytes"] - np.where(
                dist_opt, (opts.param_dtype_bytes - 1.0) * params.fp8_linear, 0.0
            )
    else:
        first["fp8_bytes"] = last["fp8_bytes"] = np.zeros(len(batch))

    shape = ActivationShape.of(job.seq_length, batch)

    def acts(moe: bool) -> LayerActivations:
        return layer_activations(
            model,
            shape,
            moe=moe,
            swiglu_fused=opts.swiglu_fused,
            flash_attention=opts.flash_attention,
            moe_imbalance=opts.moe_token_imbalance,
        )

    dense_acts = acts(False)
    moe_acts = acts(True) if model.is_moe else dense_acts
    saved_dense = _saved_per_layer(dense_acts, batch.recompute)
    saved_moe = _saved_per_layer(moe_acts, batch.recompute)
    mtp_acts = moe_acts if model.moe_layer_pattern()[-1] else dense_acts
    # MTP depth: its layer plus enorm/hnorm/eh-projection inputs (3 x 2sbh)
    saved_mtp = _saved_per_layer(mtp_acts, batch.recompute) + 3 * dense_acts.layer_input
    # full recompute regenerates one layer's complete activations at a time (Korthikanti §5)
    regenerated = np.where(
        batch.recompute == RECOMPUTE_FULL, np.maximum(dense_acts.full, moe_acts.full), 0.0
    )
    inflight_first, inflight_last = in_flight_microbatches(
        batch, job.global_batch_size, overlap.enabled(model, cluster, batch)
    )
    stage_output = dense_acts.layer_input if opts.keep_stage_outputs else 0.0
    first["activations_bytes"] = (
        inflight_first
        * (layers.first_dense * saved_dense + layers.first_moe * saved_moe + stage_output)
        + regenerated
    )
    last["activations_bytes"] = (
        inflight_last
        * (
            layers.last_dense * saved_dense
            + layers.last_moe * saved_moe
            + model.mtp_num_layers * saved_mtp
        )
        + regenerated
    )

    h = model.hidden_size
    tokens = shape.tokens
    if opts.embedding_input == "fujii":
        # 8 s b h p / (t c) (memory-estimator-fujii §5.3)
        embedding_input = 8.0 * tokens * h * batch.pp / shape.t
    else:
        # int64 token and position ids, plus the embedding dropout mask when dropout is on
        per_mb = 16.0 * tokens + (tokens * h / shape.sp_shard if model.hidden_dropout > 0 else 0)
        embedding_input = inflight_first * per_mb
    single = batch.pp == 1
    first["embedding_input_bytes"] = embedding_input
    last["embedding_input_bytes"] = np.where(single, embedding_input, 0.0)

    vocab = padded_vocab(model, batch.tp)
    # fp32 logits kept by the cross-entropy per output head (main + D MTP heads), the transient
    # bf16 logits, and the fp32 output-layer input: 4sbh + 4sbV (Fujii §5.3), on the last rank
    logits = (
        FP32 * tokens * vocab / shape.t * (1 + model.mtp_num_layers)
        + BF16 * tokens * vocab / shape.t
        + FP32 * tokens * h / shape.sp_shard
    )
    last["logits_bytes"] = logits
    first["logits_bytes"] = np.where(single, logits, 0.0)

    workspace = backward_workspace(model, shape, moe_imbalance=opts.moe_token_imbalance)
    first["workspace_bytes"] = last["workspace_bytes"] = workspace

    # pipeline send/recv of s/(c t) x b x h activations and gradients, doubled when interleaved
    p2p = np.where(batch.pp > 1, 4 * BF16 * tokens * h / shape.sp_shard, 0.0)
    p2p = p2p * np.where(batch.vpp > 1, 2.0, 1.0)
    comm = p2p + opts.dp_bucket_bytes
    if model.is_moe:
        # all-to-all dispatch and combine buffers of one MoE layer
        routed = routed_tokens(model, shape, opts.moe_token_imbalance)
        comm = comm + 2 * BF16 * routed * h
    # FSDP: two layers' gathered bf16 weights (prefetch) and one layer's fp32 gradients
    layer = np.maximum(
        counts.dense_layer.tp_sharded / shape.t + counts.dense_layer.replicated,
        counts.moe_layer.tp_sharded / shape.t
        + counts.moe_layer.replicated
        + counts.moe_layer.routed_experts / (batch.etp * batch.ep),
    )
    comm = comm + np.where(batch.optimizer_sharding == SHARD_FULL, (2 * 2 + 4) * layer, 0.0)
    first["comm_buffers_bytes"] = last["comm_buffers_bytes"] = comm

    runtime = np.zeros(len(batch))
    if opts.include_runtime_overhead:
        runtime = (
            opts.cuda_context_bytes
            + opts.library_workspace_bytes
            + opts.nccl_bytes_per_communicator * _communicators(model, batch)
        )
    first["runtime_overhead_bytes"] = last["runtime_overhead_bytes"] = runtime
    for stage in (first, last):
        dynamic = (
            stage["activations_bytes"]
            + stage["logits_bytes"]
            + stage["workspace_bytes"]
            + stage["comm_buffers_bytes"]
        )
        fraction = opts.fragmentation_fraction if opts.include_runtime_overhead else 0.0
        stage["fragmentation_bytes"] = fraction * dynamic

    first_terms = {name: np.asarray(first[name], dtype=np.float64) for name in TERM_NAMES}
    last_terms = {name: np.asarray(last[name], dtype=np.float64) for name in TERM_NAMES}
    first_total: FloatArray = np.sum([first_terms[k] for k in TERM_NAMES], axis=0)
    last_total: FloatArray = np.sum([last_terms[k] for k in TERM_NAMES], axis=0)
    worst: IntArray = (last_total > first_total).astype(np.int64)
    total: FloatArray = np.maximum(first_total, last_total)
    terms = {k: np.where(worst == 1, last_terms[k], first_terms[k]) for k in TERM_NAMES}
    capacity = float(cluster.gpu.hbm_bytes)
    return MemoryEstimate(
        terms=terms,
        first_stage_terms=first_terms,
        last_stage_terms=last_terms,
        first_stage_bytes=first_total,
        last_stage_bytes=last_total,
        total_bytes=total,
        worst_stage=worst,
        capacity_bytes=capacity,
        threshold=opts.threshold,
        fits=total <= opts.threshold * capacity,
        stage_params={
            "first_dense": first_params.dense,
            "first_expert": first_params.expert,
            "last_dense": last_params.dense,
            "last_expert": last_params.expert,
        },
    )
