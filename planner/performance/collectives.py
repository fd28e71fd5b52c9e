"""Collective-communication times on the links a process group actually crosses.

Ranks are laid out as Megatron does by default (megatron-facts §1.1, order ``tp-cp-ep-dp-pp``):
TP innermost, then CP, then DP (EP is carved out of the CP x DP ranks of the expert grid), PP
outermost. A group of ``size`` ranks whose members are ``stride`` ranks apart stays inside one
node when size x stride <= gpus_per_node; otherwise it has ``members per node`` = the ranks of it
that share a node, and its bus bandwidth is bounded by that many NICs (performance-facts §4.4:
all NICs of a node work at once, so a ring across nodes reaches g x the per-NIC rate, capped by
NVLink).

Time of one collective (performance-facts §4.1): factor(n) x S / busbw(S), with nccl-tests'
factors: all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n, send/recv 1, S
the full buffer. Where the GPU carries its bandwidth-versus-size curves (``GPUSpec.collectives``,
models_db/collectives), busbw(S) = beta_max S / (S + S_half) of the group's operation, size and
link (mechanisms-facts §2: 4-16 MB TP/CP/PP/EP messages run far below the plateau the large DP
buckets see); across nodes a ring pools its members' NICs while an all-to-all or a send/recv
gets one NIC per GPU at most (performance-facts §4.2, §4.4). Without curves: one constant
efficiency per link and a latency of log2(n) steps (performance-facts §4.3 fitted alpha:
8/12/20 us for n = 2/4/8 inside an H100 node).

A 'mesh' node (``ClusterSpec.intra_node_topology``) has one direct link per GPU pair: a group of
n ranks drives n - 1 of a GPU's g - 1 links, a send/recv one of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray, IntArray
from planner.performance.collective_bandwidth import (
    CollectiveOp,
    CollectiveTable,
    collective_time,
    group_params,
)

RING_OPS: dict[float, CollectiveOp] = {2.0: "all_reduce", 1.0: "all_gather"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Links:
    """Effective link speeds for one cluster and profile (bytes/s and seconds)."""

    gpus_per_node: int
    nvlink_busbw_bytes_per_s: float
    """Achieved intra-node bus bandwidth (spec per-direction NVLink x efficiency)."""
    nic_busbw_bytes_per_s: float
    """Achieved network bandwidth of one GPU's NIC (spec per GPU x efficiency)."""
    intra_latency_s: float
    inter_latency_s: float
    table: CollectiveTable | None = None
    """The GPU's bandwidth-vs-size curves; None prices every link at a constant efficiency."""
    network_bytes_per_s: float = 0.0
    """Network bandwidth per GPU, spec (a ring across nodes pools its members' share)."""
    single_nic_bytes_per_s: float = 0.0
    """What one GPU's all-to-all or send/recv across nodes can use: one NIC at most
    (performance-facts §4.2), or the GPU's share where a NIC serves several GPUs."""
    mesh: bool = False
    """Direct GPU-to-GPU links instead of a switch (``intra_node_topology='mesh'``)."""


def mesh_links(links: Links, size: IntArray | FloatArray, op: CollectiveOp) -> FloatArray:
    """Share of a GPU's scale-up bandwidth a group reaches: 1 on a switch; on a mesh the
    group's n - 1 direct links (one for a send/recv) of the GPU's g - 1 (catalog-facts §2.3)."""
    n = np.asarray(size, np.float64)
    if not links.mesh or links.gpus_per_node < 3:
        return np.ones_like(n)
    used = np.ones_like(n) if op == "send_recv" else np.maximum(n - 1.0, 1.0)
    return np.asarray(np.minimum(used / (links.gpus_per_node - 1.0), 1.0), np.float64)


def curve_time(
    links: Links,
    op: CollectiveOp,
    size: IntArray | FloatArray,
    stride: IntArray | FloatArray,
    message_bytes: FloatArray,
    messages: FloatArray | float = 1.0,
) -> FloatArray:
    """``messages`` collectives of ``message_bytes`` each on the curves of ``links.table``:
    f(n) (S + S_half) / beta_max per message (mechanisms-facts §2.1); 0 for a group of one."""
    assert links.table is not None  # callers branch on it
    n = np.asarray(size, np.float64)
    g = members_per_node(links, np.asarray(size), np.asarray(stride))
    nic = (
        links.network_bytes_per_s
        if op in ("all_reduce", "all_gather", "reduce_scatter")
        else (links.single_nic_bytes_per_s)
    )
    beta, half = group_params(links.table, op, n, g, nic)
    inside = g >= n
    beta = np.where(inside, beta * mesh_links(links, n, op), beta)
    s = np.asarray(message_bytes, np.float64)
    t = collective_time(op, n, s, beta, half)
    return np.asarray(t * np.asarray(messages, np.float64), np.float64)


def members_per_node(links: Links, size: IntArray, stride: IntArray) -> FloatArray:
    """How many members of a (size, stride) group share one node (1 when stride >= node)."""
    per_node = np.maximum(links.gpus_per_node // np.maximum(stride, 1), 1)
    return np.asarray(np.minimum(size, per_node), dtype=np.float64)


def crosses_nodes(links: Links, size: IntArray, stride: IntArray) -> np.ndarray:
    return np.asarray(size * stride > links.gpus_per_node)


def busbw(links: Links, size: IntArray, stride: IntArray) -> FloatArray:
    """Bus bandwidth of a group: NVLink inside a node, g_local NICs (capped by NVLink) across."""
    cross = crosses_nodes(links, size, stride)
    g = members_per_node(links, size, stride)
    net = np.minimum(links.nvlink_busbw_bytes_per_s, g * links.nic_busbw_bytes_per_s)
    intra = links.nvlink_busbw_bytes_per_s * mesh_links(links, size, "all_reduce")
    return np.where(cross, net, intra)


def latency(links: Links, size: IntArray, stride: IntArray) -> FloatArray:
    """alpha of one collective: log2(n) steps inside a node, plus one network alpha per extra
    node the ring visits (performance-facts §4.4: ring latency grows linearly with nodes)."""
    g = members_per_node(links, size, stride)
    intra = links.intra_latency_s * np.log2(np.maximum(g, 2.0))
    nodes = size / g
    inter = links.inter_latency_s * np.maximum(nodes - 1.0, 0.0)
    return np.asarray(intra + inter, np.float64)


def ring_time(
    links: Links,
    size: IntArray,
    stride: IntArray,
    buffer_bytes: FloatArray,
    factor_numerator: float,
    *,
    messages: FloatArray | float = 1.0,
    op: CollectiveOp | None = None,
) -> FloatArray:
    """``buffer_bytes`` moved by one ring collective per group, in ``messages`` equal messages
    (DDP buckets); 0 for n = 1.

    factor_numerator is 2 for all-reduce and 1 for all-gather, reduce-scatter and all-to-all
    (nccl-tests busbw convention, performance-facts §4.1); ``op`` picks the curve (default: the
    all-reduce or all-gather one the factor names). With curves each message pays its own
    S_half (mechanisms-facts §2.1); without, alpha + factor x S / busbw per message.
    """
    if links.table is not None:
        kind = op if op is not None else RING_OPS[factor_numerator]
        per = np.asarray(buffer_bytes, np.float64) / np.asarray(messages, np.float64)
        return curve_time(links, kind, size, stride, per, messages)
    n = size.astype(np.float64)
    factor = factor_numerator * (n - 1.0) / n
    t = messages * latency(links, size, stride) + factor * buffer_bytes / busbw(links, size, stride)
    return np.where(size > 1, t, 0.0)


def p2p_time(links: Links, crosses: np.ndarray, message_bytes: FloatArray) -> FloatArray:
    """One point-to-point transfer (pipeline send/recv, CP ring step): one link, one direction.

    With curves: the send/recv curve inside a node, one NIC across (mechanisms-facts §2.4)."""
    if links.table is not None:
        pair = np.full(np.shape(crosses), 2.0)
        apart = np.where(crosses, float(links.gpus_per_node), 1.0)  # the pair on two nodes
        return curve_time(links, "send_recv", pair, apart, message_bytes)
    mesh = float(mesh_links(links, np.array([2.0]), "send_recv")[0])
    bw = np.where(crosses, links.nic_busbw_bytes_per_s, links.nvlink_busbw_bytes_per_s * mesh)
    alpha = np.where(crosses, links.inter_latency_s, links.intra_latency_s)
    return np.asarray(alpha + message_bytes / bw, np.float64)


def all_to_all_time(
    links: Links,
    size: IntArray,
    stride: IntArray,
    buffer_bytes: FloatArray,
    inter_share: FloatArray | float = 1.0,
) -> FloatArray:
    """One all-to-all of ``buffer_bytes`` per GPU (EP dispatch or combine); 0 for n = 1.

    Unlike a ring, an all-to-all cannot pool a node's NICs. Without curves: each GPU sends the
    (n - g)/n of its buffer bound for other nodes through its own NIC while the (g - 1)/n for
    its node's peers go over NVLink at the same time (performance-facts §5.1: plain NCCL
    all-to-all across nodes reaches one NIC's ~48 GB/s per GPU; DeepEP 40-60 GB/s per GPU on
    400G). ``inter_share`` scales the cross-node bytes (DeepEP's one copy per destination node).
    """
    n = size.astype(np.float64)
    g = members_per_node(links, size, stride)
    if links.table is not None:
        # across nodes NCCL's all-to-all runs at one NIC's busbw for the whole buffer ("Alltoall
        # cannot aggregate the bandwidth of multiple NICs": 32 DGX H100, 48 GB/s busbw,
        # performance-facts §4.2), not only for its remote share; inside a node on its own
        # curve (mechanisms-facts §2.2). inter_share scales the network part (DeepEP).
        whole = curve_time(links, "all_to_all", size, stride, buffer_bytes)
        local = curve_time(links, "all_to_all", g, stride, buffer_bytes * g / n)
        t = np.where(g >= n, whole, np.maximum(local, inter_share * whole))
        return np.asarray(np.where(size > 1, t, 0.0), np.float64)
    intra = (
        (g - 1.0)
        / n
        * buffer_bytes
        / (links.nvlink_busbw_bytes_per_s * mesh_links(links, g, "all_to_all"))
    )
    inter = inter_share * (n - g) / n * buffer_bytes / links.nic_busbw_bytes_per_s
    t = latency(links, size, stride) + np.maximum(intra, inter)
    return np.where(size > 1, t, 0.0)


def link_share(links: Links, size: IntArray, stride: IntArray) -> FloatArray:
    """The group's bus bandwidth / NVLink's: how much of an NVLink collective's SM and HBM load
    the same time on this group's links carries (1 inside a node, ~0.13 on one 400G NIC)."""
    return np.asarray(busbw(links, size, stride) / links.nvlink_busbw_bytes_per_s, np.float64)


def p2p_share(links: Links, crosses: np.ndarray) -> FloatArray:
    """link_share of a point-to-point transfer (NIC across nodes, NVLink inside)."""
    ratio = links.nic_busbw_bytes_per_s / links.nvlink_busbw_bytes_per_s
    return np.asarray(np.where(crosses, min(ratio, 1.0), 1.0), np.float64)
