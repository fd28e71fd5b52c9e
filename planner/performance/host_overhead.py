"""Host launch costs, device-to-host synchronisations and CUDA graphs (issue 12 item 5,
mechanisms-facts §3).

Eager PyTorch/TE launches every kernel from Python: a few microseconds of host time each
(§3.1). While the GPU has queued work the host runs ahead and its time is hidden; it binds when
the GPU's kernels are shorter than the host's time to launch them. A device-to-host
synchronisation empties the queue: the host waits for the GPU, then the GPU waits for the host's
next launches. So a micro-batch whose forward has k syncs runs as k + 1 segments, each taking
max(GPU time, host time) plus the sync's round trip (§3.1 model, §3.3):

    T = sum over segments max(G_seg, H_seg) + syncs x sync_s

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
ROUTER_UNFUSED = 72  # DSv3 MXFP8 router (MLM-DSV3 §2.1.4)
ROUTER_FUSED = 31  # with --moe-router-fusion
ROUTER_DEEPEP = 17  # router + EP preprocess with DeepEP's fused layout kernel (§2.2.1)
PREPROCESS_ALLTOALL = 6  # counts per expert, their all-gather over TP x EP, split sizes [inferred]
PERMUTE_FUSED = 2  # per permute/unpermute with TE's fused kernels (row_id_map + gather) [inferred]
PERMUTE_UNFUSED = 6  # sort / index / gather chain of the unfused path [inferred]
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


@dataclass(frozen=True, slots=True)
class LayerKernels:
    """Eager kernel launches of one layer per micro-batch, split by what a graph can capture."""

    capturable_fwd: FloatArray
    """Kernels a per-layer ``partial`` graph captures (attention, router, preprocessing)."""
    capturable_bwd: FloatArray
    eager_fwd: FloatArray
    """Kernels that stay eager under ``partial`` graphs (dropless experts, dispatch, permute)."""
    eager_bwd: FloatArray
    graphs_per_pass: float
    """Captured regions per layer and pass under ``partial`` (one graph launch each)."""

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
) -> LayerKernels:
    """Kernels of one dense TE layer, forward and backward (mechanisms-facts §3.2). ``amax``:
    the fp8 recipe is current scaling, one amax kernel before each quantize (§3.2)."""
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
    return LayerKernels(
        capturable_fwd=np.asarray(fwd + cp_fwd, np.float64),
        capturable_bwd=np.asarray(bwd + cp_bwd, np.float64),
        eager_fwd=np.zeros_like(c),
        eager_bwd=np.zeros_like(c),
        graphs_per_pass=1.0,
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
    if flex:
        router = float(ROUTER_DEEPEP)  # router + preprocess fused with the layout kernel
    else:
        router = float((ROUTER_FUSED if router_fusion else ROUTER_UNFUSED) + PREPROCESS_ALLTOALL)
    router_bwd = router / 2.0  # score function, top-k and aux-loss backward [inferred]
    permute = float(PERMUTE_FUSED if permute_fusion else PERMUTE_UNFUSED)
    # permute 1 and 2 forward, unpermute 2 and 1 after the experts; flex fuses permute 1 into
    # the communication kernel (MLM-DSV3 §2.1.1)
    permutes = (3.0 if flex else 4.0) * permute
    a2a = 2.0 if flex else 4.0  # dispatch (tokens, probs) + combine; flex: one kernel each way
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
    eager_fwd = permutes + a2a + gemm_fwd + act
    eager_bwd = permutes + a2a + gemm_bwd + act
    if not capture_shared_experts:
        eager_fwd, eager_bwd = eager_fwd + shared_fwd, eager_bwd + shared_bwd
        shared_fwd = shared_bwd = 0.0
    return LayerKernels(
        capturable_fwd=np.asarray(attn_fwd + router + shared_fwd, np.float64),
        capturable_bwd=np.asarray(attn_bwd + router_bwd + shared_bwd, np.float64),
        eager_fwd=np.asarray(eager_fwd * np.ones_like(e), np.float64),
        eager_bwd=np.asarray(eager_bwd * np.ones_like(e), np.float64),
        graphs_per_pass=2.0,  # attention; router + preprocess (+ shared experts)
    )


def _host_time(
    kernels: LayerKernels, graphs: CudaGraphs, costs: HostCosts
) -> tuple[tuple[FloatArray, FloatArray], tuple[FloatArray, FloatArray]]:
    """Host seconds of one layer per micro-batch: ((eager fwd, bwd), (capturable fwd, bwd)).

    The eager part is what no per-layer graph captures (dispatch, experts, combine); the
    capturable part is one graph launch per captured region under ``partial`` (§3.4).
    """
    if graphs == "full_iteration":
        zero = np.zeros_like(kernels.eager_fwd)
        return (zero, zero), (zero, zero)
    eager = (
        np.asarray(kernels.eager_fwd * costs.per_kernel_s, np.float64),
        np.asarray(kernels.eager_bwd * costs.per_kernel_s, np.float64),
    )
    if graphs == "partial":
        g = np.full_like(eager[0], kernels.graphs_per_pass * costs.per_graph_launch_s)
        return eager, (g, g)
    return eager, (
        np.asarray(kernels.capturable_fwd * costs.per_kernel_s, np.float64),
        np.asarray(kernels.capturable_bwd * costs.per_kernel_s, np.float64),
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
    graph_copy_s: FloatArray | float = 0.0,
    tail_host_fwd_s: FloatArray | float = 0.0,
    tail_host_bwd_s: FloatArray | float = 0.0,
) -> MicroBatchHostTime:
    """Wall time of one micro-batch's layers on one stage with the host in the loop (§3.1).

    The forward is split into segments at its D2H syncs (``DISPATCH_SYNCS`` per MoE layer,
    §3.3). A sync empties the GPU's queue, so each segment starts with the host launching into
    an idle GPU, in program order: first the eager part of the MoE layer that synced (dispatch,
    experts, combine: ``moe_eager_share`` of its GPU time), then the next layer's capturable
    part (attention, router, preprocessing), then the next sync. Two in-order stages (host
    launches, GPU runs) take the two-machine flow-shop time max(G_e + G_c, H_e + G_c,
    H_e + H_c): the GPU idles while the host launches the eager part, and a host-heavy router
    right before the sync cannot hide behind anything. Without syncs the host runs ahead and
    the pass takes max(G, H). The backward has no sync (it reuses the host splits).

    ``graph_copy_s``: GPU seconds one captured region spends copying its inputs (and in the
    backward its output gradients) into the graph's static buffers [inferred from §3.4: static
    input/output buffers], paid per graph launch under ``partial``.

    ``tail_host_*_s``: host seconds of launches outside the layers (the loss rank's output
    layers and losses), whose GPU time is already in the layers' GPU time; they follow the last
    layer in the forward (no sync after it) and lead the backward.
    """
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
    nd = np.asarray(dense_layers, dtype=np.float64)
    nm = np.asarray(moe_layers, dtype=np.float64)
    syncs_per_layer = DISPATCH_SYNCS[dispatcher] if moe_kernels is not None else 0
    if cuda_graphs == "full_iteration" and syncs_per_layer and np.any(nm > 0):
        raise SpecError(
            f"cuda_graphs='full_iteration' cannot capture the {dispatcher} dispatcher's "
            "device-to-host sync; use cuda_graphs='partial', or a sync-free dispatcher "
            "(drop-and-pad, or HybridEP with --moe-expert-rank-capacity-factor)",
            field="cuda_graphs",
        )
    share = np.clip(np.asarray(moe_eager_share, np.float64), 0.0, 1.0)
    (_, _), (dc_f, dc_b) = _host_time(dense_kernels, cuda_graphs, costs)
    me_f = me_b = mc_f = mc_b = np.zeros_like(nd)
    copies: FloatArray | float = 0.0
    if cuda_graphs == "partial":
        copies = dense_kernels.graphs_per_pass * np.asarray(graph_copy_s, np.float64)
    moe_copies = copies
    if moe_kernels is not None:
        (me_f, me_b), (mc_f, mc_b) = _host_time(moe_kernels, cuda_graphs, costs)
        if cuda_graphs == "partial":
            moe_copies = moe_kernels.graphs_per_pass * np.asarray(graph_copy_s, np.float64)
    # GPU seconds per pass: the eager part of the MoE layers, and everything capturable
    ge_f = nm * moe_gpu_fwd_s * share
    gc_f = nd * (dense_gpu_fwd_s + copies) + nm * (moe_gpu_fwd_s * (1.0 - share) + moe_copies)
    g_bwd = nd * (dense_gpu_bwd_s + copies) + nm * (moe_gpu_bwd_s + moe_copies)
    he_f = nm * me_f
    hc_f = nd * dc_f + nm * mc_f + np.asarray(tail_host_fwd_s, np.float64)
    h_bwd = nd * dc_b + nm * (me_b + mc_b) + np.asarray(tail_host_bwd_s, np.float64)
    fixed = costs.per_micro_batch_s if cuda_graphs == "none" else costs.per_graph_launch_s
    syncs = nm * syncs_per_layer
    if syncs_per_layer:
        # one segment per MoE layer; the flow shop of each, summed (every segment alike)
        fwd = np.maximum(np.maximum(ge_f + gc_f, he_f + gc_f), he_f + hc_f)
        fwd = np.where(nm > 0, fwd, np.maximum(gc_f, hc_f)) + syncs * costs.per_sync_s
    else:
        fwd = np.maximum(ge_f + gc_f, he_f + hc_f)
    bwd = np.maximum(g_bwd, h_bwd)
    return MicroBatchHostTime(
        gpu_s=np.asarray(
            nd * (dense_gpu_fwd_s + dense_gpu_bwd_s) + nm * (moe_gpu_fwd_s + moe_gpu_bwd_s),
            np.float64,
        ),
        host_s=np.asarray(he_f + hc_f + h_bwd + fixed, np.float64),
        total_s=np.asarray(fwd + bwd + fixed, np.float64),
        syncs=np.asarray(syncs, np.float64),
    )


def step_host_time(*, cuda_graphs: CudaGraphs, costs: HostCosts) -> float:
    """Once per iteration: the loss / grad-norm reduction read back by the host (one sync), and
    for ``full_iteration`` the graph launch (optimizer excluded from the graph, §3.4)."""
    launch = costs.per_graph_launch_s if cuda_graphs == "full_iteration" else 0.0
    return costs.per_sync_s + launch
