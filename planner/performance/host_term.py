"""The host term of the step time: launch costs, MoE dispatch syncs and CUDA graphs.

Wires :mod:`planner.performance.host_overhead` (mechanisms-facts §3) into the step time in place
of the fitted per-layer overhead: every micro-batch runs its stage's layers with the host in the
loop (segments between the dispatcher's device-to-host syncs, each a launch queue that starts
empty, :mod:`planner.performance.host_queue`; recompute replays launched again,
:mod:`planner.performance.host_replay`), plus a fixed per-micro-batch cost;
``Layout.cuda_graphs`` removes the launches a graph captures (§3.4). The host costs are the
profile's ``host_*`` priors, from the facts sheets, not fitted per source.

Stack decisions (stated, not fitted): expert GEMMs launch as the job's
``moe_grouped_gemm_kernel`` says (TE's default: one cuBLAS GEMM per local expert on 4 streams;
or one grouped kernel per linear, mechanisms-facts §4.1); the router is unfused (router fusion
needs core >= 0.14 and is opt-in, §8); permute fusion is on (``--moe-permute-fusion``, NVIDIA's
MoE recipes) where the job's release has it (core 0.11 / TE 1.11, §8), else the unfused permute's
kernels are launched (``moe_kernels.PERMUTE_UNFUSED``; the compute term prices their fixed GPU
time, and no row_id_map: §4.4 states the fused kernel's only); the flex dispatcher is DeepEP
(§3.3).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TypeVar

import numpy as np

from planner.layout_types import CUDA_GRAPHS_CHOICES
from planner.layouts import BoolArray, FloatArray, IntArray
from planner.performance.compute import gemms_time, router_fwd_equivalent
from planner.performance.context import StepContext
from planner.performance.expert_parallel import routed_expert_parts
from planner.performance.host_overhead import (
    HostCosts,
    LayerKernels,
    dense_layer_kernels,
    micro_batch_time,
    moe_layer_kernels,
    step_host_time,
)
from planner.performance.host_replay import (
    ReplaySettings,
    replay_launches,
    replay_settings,
    replayed_gpu_s,
)
from planner.performance.host_segments import NO_REPLAY
from planner.performance.memory_settings import ReplayParts
from planner.performance.output_layer import head_kernels
from planner.performance.output_layer import heads as head_count
from planner.space import comm_flags
from planner.stack_settings import effective_kernel
from planner.stack_versions import missing

_T = TypeVar("_T")
_A = TypeVar("_A", FloatArray, IntArray)


def host_costs(ctx: StepContext) -> HostCosts:
    prof = ctx.profile
    return HostCosts(
        per_kernel_s=prof.host_kernel_s,
        per_graph_launch_s=prof.host_graph_launch_s,
        per_sync_s=prof.host_sync_s,
        per_micro_batch_s=prof.host_micro_batch_s,
    )


def host_exposed_time(
    ctx: StepContext,
    gpu_mb: FloatArray,
    *,
    moe_block_fwd: FloatArray | None = None,
    ep_mb: FloatArray | None = None,
    capture_shared_experts: bool = True,
    replay: tuple[ReplayParts, FloatArray] | None = None,
) -> FloatArray:
    """Seconds the host adds to one micro-batch whose stage runs ``gpu_mb`` on the GPU.

    The stage's GPU time is spread evenly over its layers (1/3 forward, 2/3 backward,
    megatron-facts §5); dense and MoE layers launch their own kernel counts (§3.2). The part
    of a MoE layer that runs eager after the dispatch sync (experts, permutes, the exposed
    all-to-all) is ``moe_block_fwd`` (the compute term's MoE block, forward units) x 3 plus the
    layer's share of ``ep_mb``; without them it is priced from the routed experts alone.
    ``capture_shared_experts``: partial graphs capture the shared experts with the router
    (§3.4: unless shared-expert overlap is on). ``replay``: the compute term's replay parts and
    the recompute term (seconds per micro-batch, inside ``gpu_mb``), whose launches the
    backward repeats (:mod:`planner.performance.host_replay`); without it the recompute's GPU
    time is spread like the rest.
    """
    frac = ctx.moe_fraction
    args = (_common(ctx, moe_block_fwd, capture_shared_experts), ep_mb, replay)
    busiest = _rank_exposed(
        ctx, gpu_mb, ctx.layers_per_stage * (1.0 - frac), ctx.layers_per_stage * frac, *args
    )
    # the loss rank launches its layers and its heads (output layer and loss, output_layer);
    # with MTP the rank that runs the MTP layers launches them too, each a full layer of the
    # last decoder layer's kind (megatron-facts §4.1): the last rank, or the layout's 'm' rank
    depth = float(ctx.shapes.mtp_layers)
    moe = ctx.shapes.mtp_is_moe
    mtp_dense, mtp_moe = (0.0, depth) if moe else (depth, 0.0)
    on_last = ctx.mtp_on_last
    last_dense = ctx.last_layers * (1.0 - frac) + on_last * mtp_dense
    last_moe = ctx.last_layers * frac + on_last * mtp_moe
    out = np.maximum(busiest, _rank_exposed(ctx, gpu_mb, last_dense, last_moe, *args, heads=True))
    if depth:
        elsewhere = _rank_exposed(
            ctx,
            gpu_mb,
            ctx.mtp_rank_layers * (1.0 - frac) + mtp_dense,
            ctx.mtp_rank_layers * frac + mtp_moe,
            *args,
        )
        out = np.maximum(out, np.where(on_last > 0, 0.0, elsewhere))
    return out


@dataclass(frozen=True, slots=True)
class _Common:
    """What every rank of a layout shares: the MoE block's parts, kernel counts, copies."""

    block: FloatArray
    """Routed experts, permutes and the MoE elementwise ops, forward units (after the sync)."""
    router: FloatArray
    """Router (and captured shared experts), forward units (before the sync)."""
    sides: tuple[FloatArray, FloatArray]
    """Of ``block``, the dispatch-side and the combine-side permutes, forward units."""
    dense_k: LayerKernels
    moe_k: dict[bool, LayerKernels]
    flex: BoolArray
    copy_s: FloatArray
    settings: ReplaySettings


def _common(ctx: StepContext, moe_block_fwd: FloatArray | None, capture_shared: bool) -> _Common:
    model = ctx.model
    block = router = np.zeros_like(ctx.tokens)
    sides = (block, block)
    if model.is_moe:
        # the router region's GPU time (router, and the shared experts when they are captured
        # with it, §3.4) runs before the sync; the rest of the MoE block after it
        router = router_fwd_equivalent(ctx)
        shared = gemms_time(ctx, ctx.shapes.shared_expert_gemms, ctx.tokens, ctx.tp)
        shared = shared if capture_shared else np.zeros_like(shared)
        parts = routed_expert_parts(ctx)
        sides = (parts.dispatch, parts.combine)
        if moe_block_fwd is None:
            block = parts.total
        else:  # the compute term's MoE block holds router and shared experts as well
            block = np.maximum(moe_block_fwd - router - shared, 0.0)
        router = router + shared
    # a captured region copies its input (SP-sharded hidden states) into its static buffer,
    # read + write at HBM speed (mechanisms-facts §3.4: static input/output buffers)
    sp_div = np.where(ctx.sp > 0, ctx.tp, 1.0)
    copy_s = 2.0 * ctx.activation_bytes / sp_div / ctx.hbm_bytes_per_s
    sp = bool(np.all(ctx.sp > 0))  # kernel counts differ by 2-4 of ~30: one value per batch
    amax = ctx.fp8_recipe == "tensorwise"  # current scaling's amax kernels (fp8_recipe_cost)
    # MoE models capture the dropless recipe's modules (attn moe_router moe_preprocess,
    # planner.megatron.version_flags): a dense layer's MLP stays eager there (§3.4)
    dense_k = dense_layer_kernels(
        tp=ctx.tp, cp=ctx.cp, sequence_parallel=sp, fp8=ctx.fp8, amax=amax,
        mlp_captured=not model.is_moe,
    )  # fmt: skip
    moe_k: dict[bool, LayerKernels] = {}
    flex = np.zeros(len(ctx.batch.tp), dtype=bool)
    if model.is_moe:
        flex = np.asarray(comm_flags.flex_dispatch(model, ctx.cluster, ctx.batch), dtype=bool)
        for is_flex in (False, True):  # DeepEP fuses router and preprocess (§3.2: 17 kernels)
            moe_k[is_flex] = moe_layer_kernels(
                tp=ctx.tp,
                cp=ctx.cp,
                local_experts=np.maximum(float(model.num_experts or 1) / ctx.ep, 1.0),
                shared_experts=bool(ctx.shapes.shared_expert_gemms),
                grouped_gemm=effective_kernel(ctx.job),  # None: TE default until chosen
                dispatcher="flex_deepep" if is_flex else "alltoall",
                # --moe-permute-fusion from core 0.11 / TE 1.11 (mechanisms-facts §8): not before
                permute_fusion=missing(ctx.job, "moe_permute_fusion", "true") is None,
                capture_shared_experts=capture_shared,
                fp8=ctx.fp8,
                amax=amax,
            )
    return _Common(block, router, sides, dense_k, moe_k, flex, copy_s, replay_settings(ctx))


def _rank_exposed(
    ctx: StepContext,
    gpu_mb: FloatArray,
    dense_n: FloatArray,
    moe_n: FloatArray,
    common: _Common,
    ep_mb: FloatArray | None,
    replay: tuple[ReplayParts, FloatArray] | None,
    *,
    heads: bool = False,
) -> FloatArray:
    """:func:`host_exposed_time` of one rank that runs ``dense_n`` + ``moe_n`` layers (and, on
    the loss rank, ``heads``: the output layers and losses, eager unless the whole iteration
    is one graph)."""
    model = ctx.model
    layers = np.maximum(dense_n + moe_n, 1.0)
    recompute_mb = np.zeros_like(np.asarray(gpu_mb, np.float64)) if replay is None else replay[1]
    per_layer = np.asarray(gpu_mb - recompute_mb, np.float64) / layers
    fwd, bwd = per_layer / 3.0, 2.0 * per_layer / 3.0
    share = router_share = dispatch_share = combine_share = np.zeros_like(per_layer)
    if model.is_moe:
        a2a = np.zeros_like(per_layer) if ep_mb is None else ep_mb / np.maximum(moe_n, 1e-9)
        per = np.maximum(per_layer, 1e-12)
        share = np.minimum((3.0 * common.block + a2a) / per, 1.0)
        router_share = np.minimum(3.0 * common.router / per, 1.0)
        # the exposed all-to-all splits evenly: K copies of h out, K copies back (§4.4)
        dispatch_share = (3.0 * common.sides[0] + 0.5 * a2a) / per
        combine_share = (3.0 * common.sides[1] + 0.5 * a2a) / per
    dense_k, moe_k, flex, copy_s = common.dense_k, common.moe_k, common.flex, common.copy_s
    costs = host_costs(ctx)
    head_fwd = head_bwd = np.zeros_like(per_layer)
    if heads:
        k_fwd, k_bwd = head_kernels(ctx)
        head_fwd = head_count(ctx) * k_fwd * costs.per_kernel_s
        head_bwd = head_count(ctx) * k_bwd * costs.per_kernel_s
    out = np.zeros_like(per_layer)
    settings = common.settings
    codes = ctx.batch.mem.cuda_graphs
    for code in range(len(CUDA_GRAPHS_CHOICES)):
        graphs = CUDA_GRAPHS_CHOICES[int(code)]
        # a dispatcher that syncs cannot sit in a full-iteration graph (the rules reject it);
        # price it as the per-layer graphs it falls back to
        if model.is_moe and graphs == "full_iteration":
            graphs = "partial"
        for is_flex in (False, True) if model.is_moe else (False,):
            mask = (codes == code) & (flex == is_flex)
            if not mask.any():
                continue
            sub = _Subset(mask)
            kernels = moe_k.get(is_flex)
            kernels = None if kernels is None else sub.fields(kernels)
            dk = sub.fields(dense_k)
            n_d, n_m, f_s, b_s = sub(dense_n), sub(moe_n), sub(fwd), sub(bwd)
            e_s, r_s = sub(share), sub(router_share)
            launches = NO_REPLAY
            if replay is not None and np.any(sub(recompute_mb) > 0):
                launches = replay_launches(
                    sub.fields(settings), sub.fields(replay[0]), sub(recompute_mb), dense_k=dk,
                    moe_k=kernels, per_layer_fwd=f_s, eager_share=e_s, router_share=r_s,
                    dense_n=n_d, moe_n=n_m,
                )  # fmt: skip
            t = micro_batch_time(
                dense_layers=n_d,
                moe_layers=n_m,
                dense_gpu_fwd_s=f_s,
                dense_gpu_bwd_s=b_s,
                moe_gpu_fwd_s=f_s,
                moe_gpu_bwd_s=b_s,
                dense_kernels=dk,
                moe_kernels=kernels,
                cuda_graphs=graphs,
                dispatcher="flex_deepep" if is_flex else "alltoall",
                costs=costs,
                moe_eager_share=e_s,
                moe_router_share=r_s,
                moe_side_shares=(sub(dispatch_share), sub(combine_share)),
                graph_copy_s=sub(copy_s),
                tail_host_fwd_s=0.0 if graphs == "full_iteration" else sub(head_fwd),
                tail_host_bwd_s=0.0 if graphs == "full_iteration" else sub(head_bwd),
                replay=launches,
            )
            out[mask] = t.exposed_s - replayed_gpu_s(launches, n_d, n_m)
    return np.asarray(out, np.float64)


@dataclass(frozen=True, slots=True)
class _Subset:
    """The layouts of one (graphs, dispatcher) group: each is priced on its own rows only."""

    mask: BoolArray

    def __call__(self, x: _A | float) -> _A:
        a = np.asarray(x)  # keeps its dtype (module bit masks are integers)
        return a[self.mask] if a.ndim and a.shape[0] == self.mask.shape[0] else a

    def fields(self, obj: _T) -> _T:
        """A dataclass of per-layout arrays, restricted to the group's rows."""
        cut = {
            f.name: self(getattr(obj, f.name))
            for f in fields(obj)  # type: ignore[arg-type]
            if isinstance(getattr(obj, f.name), np.ndarray)
        }
        return replace(obj, **cut)  # type: ignore[type-var]


def step_host_seconds(ctx: StepContext) -> FloatArray:
    """Once per iteration: the loss read-back sync and, for full-iteration graphs, the launch."""
    costs = host_costs(ctx)
    codes = ctx.batch.mem.cuda_graphs
    per = np.array([step_host_time(cuda_graphs=g, costs=costs) for g in CUDA_GRAPHS_CHOICES])
    return np.asarray(per[codes], np.float64)
