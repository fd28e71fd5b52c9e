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

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from planner.layout_settings import FP8_GATHER_AUTO, FP8_GATHER_ON, GRAPHS_FULL, GRAPHS_PARTIAL
from planner.layouts import (
    DISPATCH_FLEX,
    RECOMPUTE_FULL,
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
from planner.memory.recompute import (
    fp8_saving,
    freeable,
    full_recompute_share,
    saved_per_layer,
)
from planner.memory.stage_loads import (
    StageLoad,
    default_loads,
    layout_loads,
    load_params,
    merge,
)
from planner.memory.stages import StageParams, in_flight_microbatches, padded_vocab
from planner.model.params import ParamCounts, param_counts
from planner.space import comm_flags as overlap
from planner.specs import ClusterSpec, ModelSpec, SpecError, TrainingJob

GIB = float(2**30)
NO_FLASH_ATTENTION = frozenset({"volta"})
"""Architectures without TE fused/flash attention (FlashAttention-2 and cuDNN fused attention
need sm80+ [U]): their attention saves the s^2 softmax tensors (Korthikanti §4.1)."""

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
    "cuda_graphs_bytes",
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
    expandable_segments: bool = False
    """``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``: the allocator grows segments in
    place instead of caching fixed blocks, so most fragmentation goes (mechanisms-facts §6.7:
    a Llama3-70B layout that ran out of memory from fragmentation at 58.8 GB passes with it)."""
    expandable_fragmentation_fraction: float = 0.02
    """Fragmentation left with expandable segments [inferred: page-granular growth]."""
    deepep_buffer_bytes: float = 2 * GIB
    """DeepEP's NVLink + RDMA buffers per GPU with the flex dispatcher [U: DeepEP sizes them by
    hidden size and group; about 1 GB each at DeepSeek-V3's size]."""

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
    worst_rank: IntArray | None = None
    """Pipeline rank of the most loaded GPU (every rank is charged when a pipeline_layout is
    given; otherwise 0 or p-1)."""
    host_bytes: FloatArray | None = None
    """Host memory per GPU for offloaded optimizer state and activations."""
    host_fits: BoolArray | None = None
    """host_bytes within the cluster's host memory per GPU (True where nothing is offloaded)."""


def _state_bytes(
    batch: LayoutBatch, job: TrainingJob, options: MemoryOptions
) -> tuple[FloatArray, FloatArray]:
    """(gradient, optimizer-state) bytes per parameter for every layout.

    bf16 (megatron-facts §4.3): fp32 main gradients (4) and fp32 master + Adam m + v (12);
    ``--grad-reduce-in-bf16``: 2-byte gradients; precision-aware optimizer with bf16 moments and
    the master weight kept as a 16-bit remainder: 2 + 2 + 2 = 6 (mechanisms-facts §6.6);
    fp16 (megatron-facts §4.3, doc row): fp16 gradients (2) and an fp32 gradient copy in the
    optimizer on top of master and moments (16).
    """
    mem = batch.mem
    n = len(batch)
    if job.precision == "fp16":
        grad = np.full(n, 2.0)
        optimizer = np.where(mem.optimizer_state_bf16, 6.0 + 4.0, 16.0)
    else:
        grad = np.where(mem.grad_reduce_bf16, 2.0, float(options.grad_dtype_bytes))
        optimizer = np.where(mem.optimizer_state_bf16, 6.0, float(options.optimizer_state_bytes))
    return grad, optimizer


def _states(
    params: StageParams,
    batch: LayoutBatch,
    grad_bytes: FloatArray,
    optimizer_bytes: FloatArray,
    options: MemoryOptions,
) -> tuple[dict[str, FloatArray], FloatArray]:
    """Weights, gradients and optimizer state on the GPU (megatron-facts §4.3, Fujii §4), and
    the optimizer bytes moved to the host by ``--optimizer-offload-fraction``."""
    dense_shard = (batch.dp * batch.cp).astype(np.float64)  # dist-opt shards over d*c (§3.1)
    expert_shard = np.maximum(batch.expert_dp, 1).astype(np.float64)
    mode = batch.optimizer_sharding
    sharded = params.dense / dense_shard + params.expert / expert_shard
    whole = params.dense + params.expert
    full = mode == SHARD_FULL
    held = np.where(full, sharded, whole)  # Torch-FSDP2 shards weights and grads too
    # 18 B/param without sharding, 6 + 12/(d c) with the distributed optimizer (§4.3)
    optimizer = optimizer_bytes * np.where(mode == SHARD_NONE, whole, sharded)
    # HybridDeviceOptimizer (§6.6): the host takes fraction f of the Adam moments off the GPU and
    # runs their step with its own fp32 master and gradient copies; the GPU keeps its master
    # shard [inferred: Qwen3-30B-A3B frees 3.8 GB per 25 % at about 1.9e9 local parameters,
    # i.e. 8 bytes per parameter = the fp32 moments]
    moments = np.where(batch.mem.optimizer_state_bf16, 4.0, 8.0)
    state_params = np.where(mode == SHARD_NONE, whole, sharded)
    fraction = batch.mem.optimizer_offload_fraction
    freed = fraction * moments * state_params
    host = fraction * (moments + 4.0 + 4.0) * state_params
    terms = {
        "weights_bytes": options.param_dtype_bytes * held,
        "gradients_bytes": grad_bytes * held,
        "optimizer_bytes": optimizer - freed,
    }
    return terms, host


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


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shared:
    """Per-layer and per-step quantities every rank's terms are built from."""

    saved_dense: FloatArray
    saved_moe: FloatArray
    saved_mtp: FloatArray
    layer_input: FloatArray
    regenerated: FloatArray
    per_mb_embedding: FloatArray
    fujii_embedding: FloatArray | None
    logits: FloatArray
    workspace: FloatArray
    comm: FloatArray
    runtime: FloatArray
    grad_bytes: FloatArray
    optimizer_bytes: FloatArray
    tokens: FloatArray
    offload_layer_bytes: FloatArray
    """Activations of the layers whose activations go to the host (legacy CPU offload)."""


def _stage_terms(
    model: ModelSpec,
    counts: ParamCounts,
    batch: LayoutBatch,
    job: TrainingJob,
    load: StageLoad,
    shared: _Shared,
    opts: MemoryOptions,
) -> tuple[dict[str, FloatArray], FloatArray, StageParams]:
    """All terms of one pipeline rank, its host bytes and its parameters."""
    params = load_params(model, counts, batch, load)
    terms, host = _states(params, batch, shared.grad_bytes, shared.optimizer_bytes, opts)
    if job.precision == "fp8":
        # TE keeps an fp8 copy and an fp8 transpose of every linear weight (1 + 1 bytes); with
        # --fp8-param-gather the fp8 weight is the model weight (1 byte instead of bf16's 2)
        # and only the transpose comes on top (FSDP's sharded weights are left as they are)
        gather = fp8_gather(job, batch)
        terms["fp8_bytes"] = np.where(gather, 1.0, 2.0) * params.fp8_linear
        dist_opt = gather & (batch.optimizer_sharding != SHARD_FULL)
        terms["weights_bytes"] = terms["weights_bytes"] - np.where(
            dist_opt, (opts.param_dtype_bytes - 1.0) * params.fp8_linear, 0.0
        )
    else:
        terms["fp8_bytes"] = np.zeros(len(batch))
    stage_output = shared.layer_input if opts.keep_stage_outputs else 0.0
    activations = (
        load.act_dense * shared.saved_dense
        + load.act_moe * shared.saved_moe
        + load.act_mtp * shared.saved_mtp
        + np.where(load.stage_output, load.inflight * stage_output, 0.0)
        + shared.regenerated
    )
    offloaded = np.minimum(shared.offload_layer_bytes * load.inflight, activations)
    terms["activations_bytes"] = activations - offloaded
    host = host + offloaded
    if shared.fujii_embedding is not None:
        terms["embedding_input_bytes"] = np.where(load.embedding, shared.fujii_embedding, 0.0)
    else:
        terms["embedding_input_bytes"] = np.where(
            load.embedding, load.inflight * shared.per_mb_embedding, 0.0
        )
    terms["logits_bytes"] = np.where(load.loss, shared.logits, 0.0)
    terms["workspace_bytes"] = shared.workspace
    terms["comm_buffers_bytes"] = shared.comm
    terms["cuda_graphs_bytes"] = graph_buffers(batch, load, shared.layer_input, shared.tokens)
    terms["runtime_overhead_bytes"] = shared.runtime
    dynamic = (
        terms["activations_bytes"]
        + terms["logits_bytes"]
        + terms["workspace_bytes"]
        + terms["comm_buffers_bytes"]
    )
    fraction = 0.0
    if opts.include_runtime_overhead:
        fraction = (
            opts.expandable_fragmentation_fraction
            if opts.expandable_segments
            else opts.fragmentation_fraction
        )
    terms["fragmentation_bytes"] = fraction * dynamic
    return terms, host, params


def fp8_gather(job: TrainingJob, batch: LayoutBatch) -> BoolArray:
    """``--fp8-param-gather`` per layout: the field where set, else on for fp8 jobs with the
    distributed optimizer or FSDP (planner.space.comm_flags)."""
    auto = overlap.fp8_param_gather(job.precision, batch.optimizer_sharding)
    code = batch.mem.fp8_param_gather
    result: BoolArray = np.where(code == FP8_GATHER_AUTO, auto, code == FP8_GATHER_ON)
    return result & (job.precision == "fp8")


def graph_buffers(
    batch: LayoutBatch, load: StageLoad, layer_input: FloatArray, tokens: FloatArray
) -> FloatArray:
    """CUDA-graph static buffers (mechanisms-facts §3.4): per-layer graphs keep a static input
    and output per captured layer and in-flight micro-batch [inferred; NVIDIA: 'a few GB, over
    10 GB with PP > 1']; a full-iteration graph keeps its static inputs (token ids, labels,
    position ids and loss mask: 32 bytes per token [inferred])."""
    graphs = batch.mem.cuda_graphs
    per_layer = 2.0 * layer_input * (load.act_dense + load.act_moe)
    whole = 32.0 * tokens * load.embedding
    result: FloatArray = np.where(
        graphs == GRAPHS_PARTIAL, per_layer, np.where(graphs == GRAPHS_FULL, whole, 0.0)
    )
    return result


def estimate_memory(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    options: MemoryOptions | None = None,
) -> MemoryEstimate:
    """Per-GPU peak bytes of every pipeline rank that can be the most loaded, per layout.

    Without a pipeline_layout: the first rank (embedding, most micro-batches in flight) and the
    last (output layer, fp32 logits, MTP). With one: every rank, from the layout itself.
    """
    opts = options or MemoryOptions()
    if cluster.gpu.architecture in NO_FLASH_ATTENTION:
        opts = replace(opts, flash_attention=False)
    counts = param_counts(model, seq_length=job.seq_length)
    a2a = overlap.enabled(model, cluster, batch)
    inflight_first, inflight_last = in_flight_microbatches(batch, job.global_batch_size, a2a)
    first_load, last_load = default_loads(model, batch, inflight_first, inflight_last)
    layouts = batch.mem.pipeline_layout
    with_layout = batch.mem.has_layout
    loads = [first_load, last_load]
    if with_layout.any():
        m = np.maximum(batch.num_microbatches(job.global_batch_size), 1).astype(np.float64)
        slots = layout_loads(model, batch, layouts, with_layout, m, a2a)
        loads = [merge(first_load, slots[0], with_layout), merge(last_load, slots[1], with_layout)]
        loads += [merge(first_load, extra, with_layout) for extra in slots[2:]]
    shared = _shared(model, counts, job, batch, opts, loads)

    results = [_stage_terms(model, counts, batch, job, load, shared, opts) for load in loads]
    stage_terms = [{k: np.asarray(r[0][k], dtype=np.float64) for k in TERM_NAMES} for r in results]
    totals = np.array([np.sum([t[k] for k in TERM_NAMES], axis=0) for t in stage_terms])
    worst_slot = np.argmax(totals, axis=0)
    total: FloatArray = totals.max(axis=0)
    pick = np.arange(len(batch))
    terms = {k: np.array([t[k] for t in stage_terms])[worst_slot, pick] for k in TERM_NAMES}
    host = np.array([r[1] for r in results])[worst_slot, pick]
    # slot 0 is rank 0, slot 1 rank p-1, slot k >= 2 rank k-1 (planner.memory.stage_loads)
    worst_rank = np.where(
        worst_slot == 0, 0, np.where(worst_slot == 1, batch.pp - 1, worst_slot - 1)
    )
    host_capacity = cluster.host_memory_bytes_per_gpu
    host_fits = host <= 0 if host_capacity is None else host <= opts.threshold * host_capacity
    capacity = float(cluster.gpu.hbm_bytes)
    first_params, last_params = results[0][2], results[1][2]
    return MemoryEstimate(
        terms=terms,
        first_stage_terms=stage_terms[0],
        last_stage_terms=stage_terms[1],
        first_stage_bytes=totals[0],
        last_stage_bytes=totals[1],
        total_bytes=total,
        worst_stage=(worst_slot == 1).astype(np.int64),
        capacity_bytes=capacity,
        threshold=opts.threshold,
        fits=(total <= opts.threshold * capacity) & host_fits,
        stage_params={
            "first_dense": first_params.dense,
            "first_expert": first_params.expert,
            "last_dense": last_params.dense,
            "last_expert": last_params.expert,
        },
        worst_rank=worst_rank.astype(np.int64),
        host_bytes=host,
        host_fits=host_fits,
    )


def _shared(
    model: ModelSpec,
    counts: ParamCounts,
    job: TrainingJob,
    batch: LayoutBatch,
    opts: MemoryOptions,
    loads: list[StageLoad],
) -> _Shared:
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

    def saved(layer: LayerActivations, moe: bool) -> FloatArray:
        free = freeable(
            model,
            shape,
            layer,
            moe=moe,
            swiglu_fused=opts.swiglu_fused,
            imbalance=opts.moe_token_imbalance,
        )
        kept = saved_per_layer(layer, free, batch, moe=moe, full_share=share)
        if job.precision != "fp8":
            return kept
        fp8 = fp8_saving(model, shape, batch, moe=moe, imbalance=opts.moe_token_imbalance)
        return np.maximum(kept - fp8, layer.layer_input)

    # block recompute: the first N layers of each model chunk (chunk = rank layers / v)
    chunk = (loads[0].dense + loads[0].moe) / batch.vpp
    share = full_recompute_share(batch.mem, chunk)
    dense_acts = acts(False)
    moe_acts = acts(True) if model.is_moe else dense_acts
    saved_dense = saved(dense_acts, False)
    saved_moe = saved(moe_acts, model.is_moe)
    mtp_moe = model.moe_layer_pattern()[-1]
    mtp_acts = moe_acts if mtp_moe else dense_acts
    # MTP depth: its layer plus enorm/hnorm/eh-projection inputs (3 x 2sbh)
    saved_mtp = saved(mtp_acts, mtp_moe and model.is_moe) + 3 * dense_acts.layer_input
    # full recompute regenerates one layer's complete activations at a time (Korthikanti §5)
    regenerated = np.where(
        batch.recompute == RECOMPUTE_FULL, np.maximum(dense_acts.full, moe_acts.full), 0.0
    )
    h = model.hidden_size
    tokens = shape.tokens
    fujii = None
    if opts.embedding_input == "fujii":
        fujii = 8.0 * tokens * h * batch.pp / shape.t  # 8 s b h p / (t c) (Fujii §5.3)
    # int64 token and position ids, plus the embedding dropout mask when dropout is on
    per_mb = 16.0 * tokens + (tokens * h / shape.sp_shard if model.hidden_dropout > 0 else 0)
    vocab = padded_vocab(model, batch)
    # fp32 logits kept by the cross-entropy per output head (main + D MTP heads), the transient
    # bf16 logits, and the fp32 output-layer input: 4sbh + 4sbV (Fujii §5.3), on the last rank
    logits = (
        FP32 * tokens * vocab / shape.t * (1 + model.mtp_num_layers)
        + BF16 * tokens * vocab / shape.t
        + FP32 * tokens * h / shape.sp_shard
    )
    workspace = backward_workspace(model, shape, moe_imbalance=opts.moe_token_imbalance)
    # pipeline send/recv of s/(c t) x b x h activations and gradients, doubled when interleaved
    p2p = np.where(batch.pp > 1, 4 * BF16 * tokens * h / shape.sp_shard, 0.0)
    p2p = p2p * np.where(batch.vpp > 1, 2.0, 1.0)
    comm = p2p + opts.dp_bucket_bytes
    if model.is_moe:
        # all-to-all dispatch and combine buffers of one MoE layer
        routed = routed_tokens(model, shape, opts.moe_token_imbalance)
        comm = comm + 2 * BF16 * routed * h
        flex = batch.moe_dispatcher == DISPATCH_FLEX
        comm = comm + np.where(flex, opts.deepep_buffer_bytes, 0.0)
    # FSDP: two layers' gathered bf16 weights (prefetch) and one layer's fp32 gradients
    layer = np.maximum(
        counts.dense_layer.tp_sharded / shape.t + counts.dense_layer.replicated,
        counts.moe_layer.tp_sharded / shape.t
        + counts.moe_layer.replicated
        + counts.moe_layer.routed_experts / (batch.etp * batch.ep),
    )
    comm = comm + np.where(batch.optimizer_sharding == SHARD_FULL, (2 * 2 + 4) * layer, 0.0)
    runtime = np.zeros(len(batch))
    if opts.include_runtime_overhead:
        runtime = (
            opts.cuda_context_bytes
            + opts.library_workspace_bytes
            + opts.nccl_bytes_per_communicator * _communicators(model, batch)
        )
    grad_bytes, optimizer_bytes = _state_bytes(batch, job, opts)
    # legacy CPU offload of the first N layers (pp = 1 only, rule 50): their saved tensors
    pattern = model.moe_layer_pattern()
    n_off = np.minimum(batch.mem.activation_offload_layers, model.num_layers)
    moe_off = np.array([sum(pattern[:k]) for k in range(model.num_layers + 1)])[n_off]
    offload = (n_off - moe_off) * saved_dense + moe_off * saved_moe
    return _Shared(
        saved_dense=saved_dense,
        saved_moe=saved_moe,
        saved_mtp=saved_mtp,
        layer_input=dense_acts.layer_input,
        regenerated=regenerated,
        per_mb_embedding=per_mb + np.zeros(len(batch)),
        fujii_embedding=fujii,
        logits=logits,
        workspace=workspace,
        comm=comm,
        runtime=runtime + np.zeros(len(batch)),
        grad_bytes=grad_bytes,
        optimizer_bytes=optimizer_bytes,
        tokens=tokens,
        offload_layer_bytes=offload,
    )
