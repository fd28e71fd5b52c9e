"""Host launch costs, device-to-host synchronisations and CUDA graphs (issue 12 item 5,
mechanisms-facts §3).

Eager PyTorch/TE launches every kernel from Python: a few microseconds of host time each
(§3.1). While the GPU has queued work the host runs ahead and its time is hidden; it binds when
the GPU's kernels are shorter than the host's time to launch them. A device-to-host
synchronisation empties the queue: the host waits for the GPU, then the GPU waits for the host's
next launches. So a micro-batch whose forward has k syncs runs as segments, each priced as a
launch queue that starts empty (:mod:`planner.performance.host_queue`: the largest of host time
to launch a prefix plus GPU time of the rest, over a few kernel groups per layer), plus the
syncs' round trips (§3.1 model, §3.3):

    T = sum over segments max over b (H_groups<=b + G_groups>b) + syncs x sync_s

MoE token dispatch syncs once per MoE layer per forward with the alltoall dispatcher (the split
sizes of the variable-size all-to-all go to the host, §3.3); the backward reuses them. CUDA
graphs replace the launches inside a captured region by one graph launch but cannot capture a
sync or a dynamic shape (§3.4): ``partial`` captures attention (and a whole dense layer), the
router and the dispatch preprocessing; dropless experts stay eager. ``full_iteration`` captures
the whole forward-backward and needs a sync-free dispatcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from planner.layouts import FloatArray
from planner.performance.host_queue import KernelGroup
from planner.performance.host_segments import (
    NO_REPLAY,
    Groups,
    PassCosts,
    ReplayLaunches,
    StageGroups,
)
from planner.performance.moe_kernels import a2a_kernels, permute_kernels, router_region_kernels
from planner.specs import SpecError

CudaGraphs = Literal["none", "partial", "full_iteration"]
CUDA_GRAPH_CHOICES: tuple[CudaGraphs, ...] = ("none", "partial", "full_iteration")
DispatchSync = Literal["alltoall", "allgather", "flex_deepep", "flex_hybridep", "sync_free"]
DISPATCH_SYNCS: dict[str, int] = {
    # mechanisms-facts §3.3: D2H syncs per MoE layer per forward
    "alltoall": 1,  # split sizes copied to the host, one event.synchronize
    "allgather": 1,  # tokens per expert .cpu()
    "flex_deepep": 2,  # DeepEP's implicit CPU wait for the received count + Megatron's .item()
    "flex_hybridep": 1,  # dynamic buffer sizing ("CPU sync in dispatch")
    "sync_free": 0,  # drop-and-pad, or HybridEP with --moe-expert-rank-capacity-factor
}

# --- kernel counts (mechanisms-facts §3.2) ------------------------------------------------------
DENSE_ATTN_FWD = 8  # norm, AG, QKV GEMM, RoPE, attention, proj GEMM, RS, residual add [inferred]
DENSE_MLP_FWD = 7  # norm, AG, FC1 GEMM, SwiGLU, FC2 GEMM, RS, residual add: 15 of "14-16"
DENSE_ATTN_BWD = 13  # dgrad + wgrad x 2 linears, norm, RoPE, attention bwd, AG/RS x 2, adds
DENSE_MLP_BWD = 15  # dgrad + wgrad x 2 linears, norm, SwiGLU bwd, AG/RS x 2, adds: 28 of "25-30"
TP_COLLECTIVES_PER_HALF = 2  # an AG and an RS per attention / MLP half, each pass (TP + SP)
FP8_QUANTIZE_FWD = 2  # proj and FC2 inputs; QKV/FC1 inputs are quantised inside the TE norm
FP8_QUANTIZE_BWD = 4  # one per output gradient of the four linears (§3.2 FP8 additions)
# router, preprocessing, permutes and all-to-alls: planner.performance.moe_kernels (the compute
# term prices the same kernels' GPU time)
STREAM_EVENTS = 8  # fork/join of TE's 4 compute streams around a multi-stream GEMM [inferred]
MULTI_STREAM_GEMMS_PER_LINEAR_BWD = 2  # dgrad + wgrad per expert ("3 per expert linear")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCosts:
    """Host-side seconds (priors; calibrated next to the other profile coefficients)."""

    per_kernel_s: float = 5e-6
    """Host time of one eager kernel: Python, PyTorch dispatch, launch ("a few us", §3.1) [U]."""
    per_graph_launch_s: float = 10e-6
    """One cudaGraphLaunch of a captured region [U]."""
    per_sync_s: float = 20e-6
    """Round trip of one D2H synchronisation: copy, event wait, first launch after it [U]."""
    per_micro_batch_s: float = 100e-6
    """Schedule bookkeeping per micro-batch without graphs (performance-facts §8: 50-200 us
    for dense models) [U]."""

    def __post_init__(self) -> None:
        for name in ("per_kernel_s", "per_graph_launch_s", "per_sync_s", "per_micro_batch_s"):
            if not getattr(self, name) >= 0:
                raise SpecError(f"{name} must be >= 0", field=name)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerKernels:
    """Eager kernel launches of one layer per micro-batch, split by what a graph can capture."""

    capturable_fwd: FloatArray
    """Kernels a per-layer ``partial`` graph captures (attention, router, preprocessing)."""
    capturable_bwd: FloatArray
    eager_fwd: FloatArray
    """Kernels that stay eager under ``partial`` graphs (dropless experts, dispatch, permute)."""
    eager_bwd: FloatArray
    router_fwd: FloatArray | float = 0.0
    """Of the capturable kernels, those of the router region (router, preprocessing, captured
    shared experts), which run after the attention half, right before the dispatch sync."""
    router_bwd: FloatArray | float = 0.0
    dispatch_fwd: FloatArray | float = 0.0
    """Of the eager kernels, those before the experts (permute 1, the dispatch all-to-alls,
    permute 2), which a pass runs first (forward) or last (backward)."""
    dispatch_bwd: FloatArray | float = 0.0
    combine_fwd: FloatArray | float = 0.0
    """Of the eager kernels, those after the experts (unpermute 2, the combine, unpermute 1)."""
    combine_bwd: FloatArray | float = 0.0

    @property
    def fwd(self) -> FloatArray:
        return np.asarray(self.capturable_fwd + self.eager_fwd)

    @property
    def bwd(self) -> FloatArray:
        return np.asarray(self.capturable_bwd + self.eager_bwd)


def dense_layer_kernels(
    *,
    tp: FloatArray,
    cp: FloatArray,
    sequence_parallel: bool = True,
    fp8: bool = False,
    amax: bool = False,
    mlp_captured: bool = True,
) -> LayerKernels:
    """Kernels of one dense TE layer, forward and backward (mechanisms-facts §3.2). ``amax``:
    the fp8 recipe is current scaling, one amax kernel before each quantize (§3.2).
    ``mlp_captured``: a ``partial`` graph takes the whole layer (an empty module list); in a
    MoE model the dropless recipe's modules (attn, moe_router, moe_preprocess) leave a dense
    layer's MLP eager (§3.4: ``mlp`` is a module of its own)."""
    t = np.asarray(tp, dtype=np.float64)
    c = np.asarray(cp, dtype=np.float64)
    # no TP: no AG/RS; TP without SP: one all-reduce per half instead of AG + RS
    per_half = np.where(t > 1, TP_COLLECTIVES_PER_HALF if sequence_parallel else 1, 0)
    drop = 2 * (TP_COLLECTIVES_PER_HALF - per_half)
    q = (2 if amax else 1) if fp8 else 0  # "one quantize (+ amax for current scaling)"
    fwd = DENSE_ATTN_FWD + DENSE_MLP_FWD - drop + q * FP8_QUANTIZE_FWD
    bwd = DENSE_ATTN_BWD + DENSE_MLP_BWD - drop + q * FP8_QUANTIZE_BWD
    # CP p2p: c attention calls + c-1 send/recv pairs + ~2c correction kernels instead of one
    # attention call (§3.2); backward: c calls + c-1 send/recv + c dQ accumulations
    cp_fwd = np.where(c > 1, (c - 1.0) + (c - 1.0) + 2.0 * c, 0.0)
    cp_bwd = np.where(c > 1, (c - 1.0) + (c - 1.0) + c, 0.0)
    # the MLP half: its kernels, its TP collectives, its quantizes (FC2 input; FC1/FC2 grads)
    mlp_fwd = DENSE_MLP_FWD - drop / 2 + q * FP8_QUANTIZE_FWD / 2
    mlp_bwd = DENSE_MLP_BWD - drop / 2 + q * FP8_QUANTIZE_BWD / 2
    eager_fwd = np.zeros_like(c) + (0.0 if mlp_captured else mlp_fwd)
    eager_bwd = np.zeros_like(c) + (0.0 if mlp_captured else mlp_bwd)
    return LayerKernels(
        capturable_fwd=np.asarray(fwd + cp_fwd - eager_fwd, np.float64),
        capturable_bwd=np.asarray(bwd + cp_bwd - eager_bwd, np.float64),
        eager_fwd=np.asarray(eager_fwd, np.float64),
        eager_bwd=np.asarray(eager_bwd, np.float64),
    )


def moe_layer_kernels(
    *,
    tp: FloatArray,
    cp: FloatArray,
    local_experts: FloatArray,
    grouped_gemm: Literal["multi_stream", "grouped"] = "multi_stream",
    router_fusion: bool = False,
    dispatcher: DispatchSync = "alltoall",
    permute_fusion: bool = True,
    shared_experts: bool = False,
    capture_shared_experts: bool = True,
    fp8: bool = False,
    amax: bool = False,
) -> LayerKernels:
    """Kernels of one MoE layer per micro-batch (mechanisms-facts §3.2, §4.1, §4.4).

    The attention half is the dense one; the MLP half is router, dispatch preprocessing, two
    permutes, the all-to-alls (tokens, probs; combine), the expert GEMMs and their activation.
    TE's default ``GroupedLinear`` launches one cuBLAS GEMM per local expert on 4 streams
    (``multi_stream``); the grouped kernels (CUTLASS, cuBLASLt grouped) one per linear.
    Shared experts join the router's graph unless ``capture_shared_experts`` is False (they
    are captured with ``moe_router`` unless shared-expert overlap is on, §3.4).
    """
    dense = dense_layer_kernels(tp=tp, cp=cp, fp8=fp8, amax=amax)
    q = 2.0 if amax else 1.0  # current scaling: an amax kernel before each quantize (§3.2)
    e = np.asarray(local_experts, dtype=np.float64)
    attn_fwd = np.asarray(dense.capturable_fwd - DENSE_MLP_FWD, np.float64)
    attn_bwd = np.asarray(dense.capturable_bwd - DENSE_MLP_BWD, np.float64)
    flex = dispatcher.startswith("flex")
    # DeepEP fuses router and preprocess with its layout kernel (§3.2)
    router, router_bwd = router_region_kernels(flex=flex, router_fusion=router_fusion)
    # permute 1 and 2 forward, unpermute 2 and 1 after the experts; flex fuses permute 1 and
    # unpermute 1 into its communication kernels (MLM-DSV3 §2.1.1, §4.4); the all-to-alls
    permutes = permute_kernels(flex=flex, permute_fusion=permute_fusion)
    a2a = a2a_kernels(flex=flex)
    dispatch = permutes.dispatch + a2a.dispatch
    combine = permutes.combine + a2a.combine
    if grouped_gemm == "multi_stream":
        gemm_fwd = 2.0 * e + STREAM_EVENTS
        gemm_bwd = 2.0 * MULTI_STREAM_GEMMS_PER_LINEAR_BWD * e + STREAM_EVENTS
        if fp8:  # per-expert quantisation on the default path (§3.2)
            gemm_fwd, gemm_bwd = gemm_fwd + 2.0 * q * e, gemm_bwd + 2.0 * q * e
    else:
        gemm_fwd = np.full_like(e, 2.0 + (2.0 * q if fp8 else 0.0))
        gemm_bwd = np.full_like(e, 4.0 + (2.0 * q if fp8 else 0.0))
    act = 1.0
    shared_fwd = (DENSE_MLP_FWD - 2.0) if shared_experts else 0.0  # no norm, no residual
    shared_bwd = (DENSE_MLP_BWD - 2.0) if shared_experts else 0.0
    eager_fwd = dispatch + combine + gemm_fwd + act
    eager_bwd = dispatch + combine + gemm_bwd + act
    if not capture_shared_experts:
        eager_fwd, eager_bwd = eager_fwd + shared_fwd, eager_bwd + shared_bwd
        shared_fwd = shared_bwd = 0.0
    # attention and router are contiguous in program order: one graph per layer and pass
    # (§3.4: graph count L_local x m x 2)
    return LayerKernels(
        capturable_fwd=np.asarray(attn_fwd + router + shared_fwd, np.float64),
        capturable_bwd=np.asarray(attn_bwd + router_bwd + shared_bwd, np.float64),
        eager_fwd=np.asarray(eager_fwd * np.ones_like(e), np.float64),
        eager_bwd=np.asarray(eager_bwd * np.ones_like(e), np.float64),
        router_fwd=np.asarray(router + shared_fwd + np.zeros_like(e), np.float64),
        router_bwd=np.asarray(router_bwd + shared_bwd + np.zeros_like(e), np.float64),
        # the backward reverses the order of the sides, not their kernels [inferred]
        dispatch_fwd=dispatch,
        dispatch_bwd=dispatch,
        combine_fwd=combine,
        combine_bwd=combine,
    )


@dataclass(frozen=True, slots=True)
class MicroBatchHostTime:
    """One micro-batch of one pipeline stage; arrays over layouts."""

    gpu_s: FloatArray
    """GPU time of the stage's layers, forward + backward (the input)."""
    host_s: FloatArray
    """Host time to launch them."""
    total_s: FloatArray
    """Wall time with the host in the loop (segments between syncs)."""
    syncs: FloatArray
    """D2H synchronisations per micro-batch."""

    @property
    def exposed_s(self) -> FloatArray:
        """What the host adds to the GPU time."""
        return np.asarray(self.total_s - self.gpu_s, np.float64)


def micro_batch_time(
    *,
    dense_layers: FloatArray,
    moe_layers: FloatArray,
    dense_gpu_fwd_s: FloatArray,
    dense_gpu_bwd_s: FloatArray,
    moe_gpu_fwd_s: FloatArray,
    moe_gpu_bwd_s: FloatArray,
    dense_kernels: LayerKernels,
    moe_kernels: LayerKernels | None,
    cuda_graphs: CudaGraphs,
    dispatcher: DispatchSync,
    costs: HostCosts,
    moe_eager_share: FloatArray | float,
    moe_router_share: FloatArray | float = 0.0,
    moe_side_shares: tuple[FloatArray | float, FloatArray | float] = (0.0, 0.0),
    graph_copy_s: FloatArray | float = 0.0,
    tail_host_fwd_s: FloatArray | float = 0.0,
    tail_host_bwd_s: FloatArray | float = 0.0,
    replay: ReplayLaunches = NO_REPLAY,
) -> MicroBatchHostTime:
    """Wall time of one micro-batch's layers on one stage with the host in the loop (§3.1).

    The host and the GPU form a launch queue (:mod:`planner.performance.host_queue`). A D2H
    sync (``DISPATCH_SYNCS`` per MoE layer in the forward; the backward reuses the host
    splits, §3.3, unless recompute replays the dispatch) empties it, so the micro-batch runs
    as segments between syncs, each from an empty queue. A MoE layer's forward is five groups
    in program order: the eager part after its sync (``moe_eager_share`` of its GPU time) as
    dispatch, experts and combine (``moe_side_shares``: the first and the last one's shares),
    then the next layer's attention half and its router region (router, preprocessing,
    captured shared experts: ``moe_router_share``), which ends at that layer's sync. The
    segment after the stage's last sync runs on through the loss rank's heads
    (``tail_host_*_s``: host launches whose GPU time is in the layers'), the backward of every
    layer, and the next micro-batch's forward up to its first sync (1F1B alternates them), so
    what the backward's GPU time hides of those launches is hidden.
    Without syncs the host runs ahead across passes and micro-batches: max(GPU, host).

    ``cuda_graphs='partial'``: each layer's captured kernels (attention and router region, or a
    whole dense layer) become one graph launch per pass (§3.4: L_local x m x 2 graphs), whose
    region first copies its inputs (in the backward its output gradients) into the graph's
    static buffers: ``graph_copy_s`` of GPU time [inferred from §3.4: static input/output
    buffers]. The schedule's own per-micro-batch work stays eager (only ``full_iteration``
    captures it).

    ``replay``: what recompute launches again in the backward, and the share of MoE layers
    whose replayed dispatch syncs again (:mod:`planner.performance.host_segments`).
    """
    nd = np.asarray(dense_layers, dtype=np.float64)
    nm = np.asarray(moe_layers, dtype=np.float64)
    syncs_per_layer = _syncs_per_layer(cuda_graphs, dispatcher, moe_kernels, nm)
    passes = PassCosts(cuda_graphs, costs, graph_copy_s)
    fwd: Groups = ()
    before: Groups = ()
    after: Groups = ()
    if moe_kernels is not None:
        fwd, before, after = passes.moe_groups(
            moe_kernels, moe_gpu_fwd_s, moe_gpu_bwd_s, moe_eager_share, moe_router_share, replay,
            sides=moe_side_shares,
        )  # fmt: skip
    # a dense layer's replay: inside its graph where the whole layer is captured
    whole = np.asarray(dense_kernels.eager_bwd, np.float64) == 0
    dense_replay = np.where(
        whole, passes.captured(replay.dense_kernels), passes.host(replay.dense_kernels)
    )
    stage = StageGroups(
        dense_layers=nd,
        moe_layers=nm,
        dense_fwd=passes.group(
            dense_kernels.capturable_fwd, dense_kernels.eager_fwd, dense_gpu_fwd_s
        ),
        dense_bwd=KernelGroup(
            host_s=passes.group(dense_kernels.capturable_bwd, dense_kernels.eager_bwd, 0.0).host_s
            + dense_replay,
            gpu_s=np.asarray(dense_gpu_bwd_s, np.float64) + replay.dense_gpu_s + passes.copy(),
        ),
        moe_fwd=fwd,
        moe_bwd_before=before,
        moe_bwd_after=after,
        tail_fwd=KernelGroup(host_s=0.0 if passes.captured_all else tail_host_fwd_s, gpu_s=0.0),
        tail_bwd=KernelGroup(host_s=0.0 if passes.captured_all else tail_host_bwd_s, gpu_s=0.0),
    )
    host = stage.host_s()
    replay_share = np.asarray(replay.sync_share, np.float64)
    if syncs_per_layer and moe_kernels is not None:
        body = stage.segmented_time(replay_share)
        if not np.all(nm > 0):  # a stage without MoE layers has no sync
            body = np.where(nm > 0, body, np.maximum(stage.gpu_s(), host))
    else:  # no sync: the host runs ahead across passes and micro-batches
        body = np.maximum(stage.gpu_s(), host)
    fixed = costs.per_graph_launch_s if passes.captured_all else costs.per_micro_batch_s
    syncs = nm * syncs_per_layer * (1.0 + replay_share)
    return MicroBatchHostTime(
        gpu_s=np.asarray(
            nd * (dense_gpu_fwd_s + dense_gpu_bwd_s) + nm * (moe_gpu_fwd_s + moe_gpu_bwd_s),
            np.float64,
        ),
        host_s=np.asarray(host + fixed, np.float64),
        total_s=np.asarray(body + syncs * costs.per_sync_s + fixed, np.float64),
        syncs=np.asarray(syncs, np.float64),
    )


def _syncs_per_layer(
    cuda_graphs: str, dispatcher: str, moe_kernels: LayerKernels | None, nm: FloatArray
) -> int:
    """The dispatcher's syncs per MoE layer forward (§3.3), after checking the settings."""
    if cuda_graphs not in CUDA_GRAPH_CHOICES:
        raise SpecError(
            f"cuda_graphs={cuda_graphs!r} is not one of {', '.join(CUDA_GRAPH_CHOICES)}",
            field="cuda_graphs",
        )
    if dispatcher not in DISPATCH_SYNCS:
        raise SpecError(
            f"moe_dispatcher={dispatcher!r} is not one of {', '.join(DISPATCH_SYNCS)}",
            field="moe_dispatcher",
        )
    syncs_per_layer = DISPATCH_SYNCS[dispatcher] if moe_kernels is not None else 0
    if cuda_graphs == "full_iteration" and syncs_per_layer and np.any(nm > 0):
        raise SpecError(
            f"cuda_graphs='full_iteration' cannot capture the {dispatcher} dispatcher's "
            "device-to-host sync; use cuda_graphs='partial', or a sync-free dispatcher "
            "(drop-and-pad, or HybridEP with --moe-expert-rank-capacity-factor)",
            field="cuda_graphs",
        )
    return syncs_per_layer


def step_host_time(*, cuda_graphs: CudaGraphs, costs: HostCosts) -> float:
    """Once per iteration: the loss / grad-norm reduction read back by the host (one sync), and
    for ``full_iteration`` the graph launch (optimizer excluded from the graph, §3.4)."""
    launch = costs.per_graph_launch_s if cuda_graphs == "full_iteration" else 0.0
    return costs.per_sync_s + launch
