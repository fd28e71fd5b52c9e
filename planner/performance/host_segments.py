"""One micro-batch of a pipeline stage as launch-queue segments between device-to-host syncs
(mechanisms-facts §3.1, §3.3, §3.4), for :func:`planner.performance.host_overhead.micro_batch_time`.

Each layer's pass is a few kernel groups in program order (:mod:`planner.performance.host_queue`).
A MoE layer's forward: the eager part after its dispatch sync as three groups (dispatch,
experts, combine: the queue sees the GPU time between their launches), then the next layer's
attention half and its router region (router, preprocessing, captured shared experts), which
ends at that layer's sync. Its backward: the eager part's backward (combine, experts, dispatch),
the router region's, the attention half's. 1F1B alternates passes, so the segment after a
micro-batch's last forward sync runs on through a backward and the next micro-batch's forward
up to its first sync.

Recompute replays forward kernels inside the backward (megatron-facts §1.6; mechanisms-facts
§6.4): the host launches them again, and a replayed MoE dispatch (the ``moe`` module, or full
recompute of a MoE layer) syncs again [inferred: its split sizes are recomputed, §3.3], so that
backward runs as segments too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from planner.layouts import FloatArray
from planner.performance.host_queue import Item, KernelGroup, RepeatedGroups, queue_time

if TYPE_CHECKING:
    from planner.performance.host_overhead import CudaGraphs, HostCosts, LayerKernels

Groups = tuple[KernelGroup, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayLaunches:
    """Forward kernels a layer's backward launches again under recompute, per layer and
    micro-batch, with the GPU seconds of what they replay; arrays over layouts."""

    dense_kernels: FloatArray | float = 0.0
    """A dense layer's replayed kernels (its forward, or the selective modules in it)."""
    dense_gpu_s: FloatArray | float = 0.0
    full_attn_kernels: FloatArray | float = 0.0
    """A MoE layer's attention half replayed by full recompute (it runs before the router's)."""
    full_attn_gpu_s: FloatArray | float = 0.0
    router_kernels: FloatArray | float = 0.0
    """The router region replayed (``moe`` module or full recompute)."""
    router_gpu_s: FloatArray | float = 0.0
    eager_kernels: FloatArray | float = 0.0
    """Dispatch, experts, combine replayed (``moe``, full), or the ``moe_act`` /
    ``shared_experts`` modules alone."""
    eager_gpu_s: FloatArray | float = 0.0
    attn_kernels: FloatArray | float = 0.0
    """Attention-side selective modules (``core_attn``, ``mla_up_proj``, ``layernorm``),
    replayed right before the attention half's backward."""
    attn_gpu_s: FloatArray | float = 0.0
    sync_share: FloatArray | float = 0.0
    """Share of the MoE layers whose replay runs the dispatch again, with its syncs."""


NO_REPLAY = ReplayLaunches()


@dataclass(frozen=True, slots=True)
class PassCosts:
    """Host and GPU seconds of a layer's kernel groups under one ``cuda_graphs`` setting."""

    graphs: CudaGraphs
    costs: HostCosts
    copy_s: FloatArray | float

    @property
    def captured_all(self) -> bool:
        return self.graphs == "full_iteration"

    def host(self, kernels: FloatArray | float) -> FloatArray:
        per = 0.0 if self.captured_all else self.costs.per_kernel_s
        return np.asarray(np.asarray(kernels, np.float64) * per, np.float64)

    def captured(self, kernels: FloatArray | float, *, launch: bool = False) -> FloatArray:
        """Host seconds of capturable kernels: eager, or one graph launch per layer and pass
        (§3.4: graph count L_local x m x 2; a replay inside a captured region is captured)."""
        if self.graphs != "partial":
            return self.host(kernels)
        n = np.zeros_like(np.asarray(kernels, np.float64))
        return n + (self.costs.per_graph_launch_s if launch else 0.0)

    def copy(self) -> FloatArray:
        return np.asarray(self.copy_s if self.graphs == "partial" else 0.0, np.float64)

    def group(
        self, capturable: FloatArray, eager: FloatArray | float, gpu: FloatArray | float
    ) -> KernelGroup:
        """A dense layer's pass as one group (its kernels alike to the queue)."""
        return KernelGroup(
            host_s=self.captured(capturable, launch=True) + self.host(eager),
            gpu_s=np.asarray(gpu, np.float64) + self.copy(),
        )

    def moe_groups(
        self,
        k: LayerKernels,
        gpu_fwd: FloatArray | float,
        gpu_bwd: FloatArray | float,
        eager_share: FloatArray | float,
        router_share: FloatArray | float,
        replay: ReplayLaunches,
        sides: tuple[FloatArray | float, FloatArray | float] = (0.0, 0.0),
    ) -> tuple[Groups, Groups, Groups]:
        """Forward (the eager part after the sync as dispatch, experts and combine; attention,
        router region); the backward up to a replayed dispatch's sync (full recompute's
        attention replay, router replay); and after it (eager replay; combine, experts and
        dispatch backward; router backward, attention replay and backward: one graph over the
        last two regions). ``sides``: the dispatch's and the combine's shares of the layer's
        GPU time, inside ``eager_share`` (the experts take the rest of it)."""
        e = np.clip(np.asarray(eager_share, np.float64), 0.0, 1.0)
        r = np.clip(np.asarray(router_share, np.float64), 0.0, 1.0 - e)
        d = np.clip(np.asarray(sides[0], np.float64), 0.0, e)
        c = np.clip(np.asarray(sides[1], np.float64), 0.0, e - d)
        f, b = np.asarray(gpu_fwd, np.float64), np.asarray(gpu_bwd, np.float64)
        rp = replay
        experts_fwd = k.eager_fwd - k.dispatch_fwd - k.combine_fwd
        experts_bwd = k.eager_bwd - k.dispatch_bwd - k.combine_bwd
        fwd = (
            KernelGroup(host_s=self.host(k.dispatch_fwd), gpu_s=d * f),
            KernelGroup(host_s=self.host(experts_fwd), gpu_s=(e - d - c) * f),
            KernelGroup(host_s=self.host(k.combine_fwd), gpu_s=c * f),
            KernelGroup(
                host_s=self.captured(k.capturable_fwd - k.router_fwd, launch=True),
                gpu_s=(1 - e - r) * f + self.copy(),
            ),
            KernelGroup(host_s=self.captured(k.router_fwd), gpu_s=r * f),
        )
        before_sync = (
            KernelGroup(host_s=self.captured(rp.full_attn_kernels), gpu_s=rp.full_attn_gpu_s),
            KernelGroup(host_s=self.captured(rp.router_kernels), gpu_s=rp.router_gpu_s),
        )
        after_sync = (
            KernelGroup(host_s=self.host(rp.eager_kernels), gpu_s=rp.eager_gpu_s),
            KernelGroup(host_s=self.host(k.combine_bwd), gpu_s=c * b),
            KernelGroup(host_s=self.host(experts_bwd), gpu_s=(e - d - c) * b),
            KernelGroup(host_s=self.host(k.dispatch_bwd), gpu_s=d * b),
            KernelGroup(host_s=self.captured(k.router_bwd, launch=True), gpu_s=r * b + self.copy()),
            KernelGroup(host_s=self.captured(rp.attn_kernels), gpu_s=rp.attn_gpu_s),
            KernelGroup(
                host_s=self.captured(k.capturable_bwd - k.router_bwd), gpu_s=(1 - e - r) * b
            ),
        )
        return fwd, before_sync, after_sync


def total(groups: Groups, field: str) -> FloatArray:
    return np.asarray(
        sum((np.asarray(getattr(g, field), np.float64) for g in groups), np.float64(0.0)),
        np.float64,
    )


def _scaled(groups: Groups, factor: FloatArray) -> list[KernelGroup]:
    return [
        KernelGroup(
            host_s=np.asarray(g.host_s, np.float64) * factor,
            gpu_s=np.asarray(g.gpu_s, np.float64) * factor,
        )
        for g in groups
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class StageGroups:
    """One micro-batch's groups on a stage: ``dense_layers`` x (fwd, bwd) and ``moe_layers`` x
    (fwd, backward before and after a replayed sync), the loss rank's head launches."""

    dense_layers: FloatArray
    moe_layers: FloatArray
    dense_fwd: KernelGroup
    dense_bwd: KernelGroup
    moe_fwd: Groups
    moe_bwd_before: Groups
    moe_bwd_after: Groups
    tail_fwd: KernelGroup
    tail_bwd: KernelGroup

    def segmented_time(self, replay_sync_share: FloatArray | float) -> FloatArray:
        """The queue time of the micro-batch when every MoE layer's forward syncs (module doc);
        a share of the layers whose replayed dispatch syncs again in the backward."""
        nd, nm = self.dense_layers, self.moe_layers
        first = np.minimum(nm, 1.0)  # a stage averaging under one MoE layer: a scaled segment
        eager, after_eager = self.moe_fwd[:-2], self.moe_fwd[-2:]  # attention, router region
        bwd = (*self.moe_bwd_before, *self.moe_bwd_after)
        inner_fwd = np.maximum(nm - 1.0, 0.0) * queue_time(self.moe_fwd)
        head: list[Item] = [*_scaled(eager, first), self.tail_fwd, self.tail_bwd]
        tail: list[Item] = [
            RepeatedGroups(groups=(self.dense_bwd,), count=nd),
            RepeatedGroups(groups=(self.dense_fwd,), count=nd),
            *_scaled(after_eager, first),
        ]
        # the backward without a sync of its own: one segment through to the next forward's
        through = queue_time([*head, RepeatedGroups(groups=bwd, count=nm), *tail])
        share = np.clip(np.asarray(replay_sync_share, np.float64), 0.0, 1.0)
        if not np.any(share > 0):
            return np.asarray(inner_fwd + through, np.float64)
        # a replayed dispatch syncs in every MoE layer's backward (module doc)
        resync_head: list[Item] = [*head, *_scaled(self.moe_bwd_before, first)]
        resync_tail: list[Item] = [*_scaled(self.moe_bwd_after, first), *tail]
        between = queue_time([*self.moe_bwd_after, *self.moe_bwd_before])
        resynced = (
            queue_time(resync_head) + np.maximum(nm - 1.0, 0.0) * between + queue_time(resync_tail)
        )
        return np.asarray(inner_fwd + (1.0 - share) * through + share * resynced, np.float64)

    def host_s(self) -> FloatArray:
        moe = (*self.moe_fwd, *self.moe_bwd_before, *self.moe_bwd_after)
        return np.asarray(
            total((self.tail_fwd, self.tail_bwd), "host_s")
            + self.dense_layers * total((self.dense_fwd, self.dense_bwd), "host_s")
            + self.moe_layers * total(moe, "host_s"),
            np.float64,
        )

    def gpu_s(self) -> FloatArray:
        """GPU seconds of every group, graph copies and replays included."""
        moe = (*self.moe_fwd, *self.moe_bwd_before, *self.moe_bwd_after)
        return np.asarray(
            self.dense_layers * total((self.dense_fwd, self.dense_bwd), "gpu_s")
            + self.moe_layers * total(moe, "gpu_s"),
            np.float64,
        )
