"""Collective-communication times on the links a process group actually crosses.

Ranks are laid out as Megatron does by default (megatron-facts §1.1, order ``tp-cp-ep-dp-pp``):
TP innermost, then CP, then DP (EP is carved out of the CP x DP ranks of the expert grid), PP
outermost. A group of ``size`` ranks whose members are ``stride`` ranks apart stays inside one
node when size x stride <= gpus_per_node; otherwise it has ``members per node`` = the ranks of it
that share a node, and its bus bandwidth is bounded by that many NICs (performance-facts §4.4:
all NICs of a node work at once, so a ring across nodes reaches g x the per-NIC rate, capped by
NVLink).

Time of one collective (performance-facts §4.1): alpha + factor(n) x S / busbw, with nccl-tests'
factors: all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n, S the full
buffer. Latency grows with log2(n) steps (performance-facts §4.3 fitted alpha: 8/12/20 us for
n = 2/4/8 inside an H100 node).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray, IntArray


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
    return np.where(cross, net, links.nvlink_busbw_bytes_per_s)


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
) -> FloatArray:
    """alpha + factor x S / busbw with factor = factor_numerator x (n-1)/n; 0 for n = 1.

    factor_numerator is 2 for all-reduce and 1 for all-gather, reduce-scatter and all-to-all
    (nccl-tests busbw convention, performance-facts §4.1).
    """
    n = size.astype(np.float64)
    factor = factor_numerator * (n - 1.0) / n
    t = latency(links, size, stride) + factor * buffer_bytes / busbw(links, size, stride)
    return np.where(size > 1, t, 0.0)


def p2p_time(links: Links, crosses: np.ndarray, message_bytes: FloatArray) -> FloatArray:
    """One point-to-point transfer (pipeline send/recv, CP ring step): one link, one direction."""
    bw = np.where(crosses, links.nic_busbw_bytes_per_s, links.nvlink_busbw_bytes_per_s)
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

    Unlike a ring, an all-to-all cannot pool a node's NICs: each GPU sends the (n - g)/n of its
    buffer bound for other nodes through its own NIC while the (g - 1)/n for its node's peers
    go over NVLink at the same time (performance-facts §5.1: plain NCCL all-to-all across nodes
    reaches one NIC's ~48 GB/s per GPU; DeepEP 40-60 GB/s per GPU on 400G). ``inter_share``
    scales the cross-node bytes (DeepEP's one copy per destination node).
    """
    n = size.astype(np.float64)
    g = members_per_node(links, size, stride)
    intra = (g - 1.0) / n * buffer_bytes / links.nvlink_busbw_bytes_per_s
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
