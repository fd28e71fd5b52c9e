"""Collective bandwidth as a function of message size (issue 12 item 3, mechanisms-facts §2).

A collective of S bytes (nccl-tests' size convention, performance-facts §4.1) on n ranks takes

    T(S) = f(n) x S / beta(S),  beta(S) = beta_max x S / (S + S_half)       (mechanisms-facts §2.1)

which is the alpha-beta model T = f S / beta_max + f S_half / beta_max, i.e. alpha = f S_half /
beta_max. ``f`` is the nccl-tests bus factor (all-reduce 2(n-1)/n; all-gather, reduce-scatter,
all-to-all (n-1)/n; send/recv 1). Each curve (beta_max, S_half) belongs to one operation, one
link kind and one group size; the numbers are catalog data (``models_db/collectives``), fitted
to AIConfigurator's one-node nccl-tests sweeps (§2.2), the 4-node EFA sweep (§2.3) and the
send/recv reports (§2.4). This module is pure arithmetic on arrays: it never reads the catalog.

Link kinds: ``switch`` (NVSwitch: any group gets the node's full per-GPU bandwidth), ``mesh``
(direct links, e.g. Infinity Fabric: a group of n uses only the n-1 links to its peers) and
``network`` (NICs between nodes: a ring pools the NICs of the group's members on one node, an
all-to-all or a send/recv gets one GPU's NIC, performance-facts §4.2, §4.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from planner.layouts import FloatArray
from planner.specs import SpecError

CollectiveOp = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]
LinkKind = Literal["switch", "mesh", "network"]
COLLECTIVE_OPS: tuple[CollectiveOp, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "send_recv",
)
LINK_KINDS: tuple[LinkKind, ...] = ("switch", "mesh", "network")
MIB = float(2**20)


def bus_factor(op: CollectiveOp, n: FloatArray | float) -> FloatArray:
    """nccl-tests bus factor f(n) (performance-facts §4.1); 0 for a group of one."""
    size = np.asarray(n, dtype=np.float64)
    if op == "send_recv":
        return np.asarray(np.where(size > 1, 1.0, 0.0), np.float64)
    scale = 2.0 if op == "all_reduce" else 1.0
    return np.asarray(scale * (size - 1.0) / np.maximum(size, 1.0), np.float64)


def saturating_busbw(
    size_bytes: FloatArray | float, beta_max: FloatArray | float, s_half: FloatArray | float
) -> FloatArray:
    """beta(S) = beta_max S / (S + S_half): bus bandwidth at message size S (§2.1)."""
    s = np.asarray(size_bytes, dtype=np.float64)
    return np.asarray(np.asarray(beta_max) * s / (s + np.asarray(s_half)), np.float64)


def collective_time(
    op: CollectiveOp,
    n: FloatArray | float,
    size_bytes: FloatArray | float,
    beta_max: FloatArray | float,
    s_half: FloatArray | float,
) -> FloatArray:
    """Seconds of one collective: f(n) (S + S_half) / beta_max (§2.1); 0 where n = 1 or S = 0."""
    f = bus_factor(op, n)
    s = np.asarray(size_bytes, dtype=np.float64)
    t = f * (s + np.asarray(s_half)) / np.asarray(beta_max)
    return np.asarray(np.where((f > 0) & (s > 0), t, 0.0), np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCurve:
    """beta(S) of one operation on one link kind for one group size."""

    op: CollectiveOp
    link: LinkKind
    group_size: int
    """Ranks the fit was made on (2, 4, 8 inside a node; the node count for ``network``)."""
    beta_max_bytes_per_s: float
    """Plateau bus bandwidth (nccl-tests busbw convention)."""
    s_half_bytes: float
    """Message size at which the bus bandwidth is half the plateau."""
    fit_error: float | None = None
    """Worst relative time error of the fit over its size range, where the source states it."""
    source: str = ""

    def __post_init__(self) -> None:
        if self.op not in COLLECTIVE_OPS:
            raise SpecError(f"op={self.op!r} is not one of {', '.join(COLLECTIVE_OPS)}", field="op")
        if self.link not in LINK_KINDS:
            raise SpecError(
                f"link={self.link!r} is not one of {', '.join(LINK_KINDS)}", field="link"
            )
        if self.group_size < 1:
            raise SpecError("group_size must be >= 1", field="group_size")
        if not self.beta_max_bytes_per_s > 0:
            raise SpecError("beta_max_bytes_per_s must be positive", field="beta_max_bytes_per_s")
        if not self.s_half_bytes >= 0:
            raise SpecError("s_half_bytes must be >= 0", field="s_half_bytes")

    def busbw(self, size_bytes: FloatArray | float) -> FloatArray:
        return saturating_busbw(size_bytes, self.beta_max_bytes_per_s, self.s_half_bytes)

    def time(self, n: FloatArray | float, size_bytes: FloatArray | float) -> FloatArray:
        return collective_time(self.op, n, size_bytes, self.beta_max_bytes_per_s, self.s_half_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkPriors:
    """How collectives across nodes use the NICs, as fractions of the per-GPU network rate.

    A ring (all-reduce, all-gather, reduce-scatter) pools the NICs of the group's members that
    share a node; an all-to-all and a send/recv get one GPU's NIC (performance-facts §4.2, §4.4).
    """

    ring_efficiency: float
    """Plateau ring busbw / (members per node x per-GPU NIC rate)."""
    ring_s_half_bytes: float
    all_to_all_efficiency: float
    all_to_all_s_half_bytes: float
    send_recv_efficiency: float
    send_recv_s_half_bytes: float
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("ring_efficiency", "all_to_all_efficiency", "send_recv_efficiency"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise SpecError(f"{name}={value} must be in (0, 1]", field=name)
        for name in ("ring_s_half_bytes", "all_to_all_s_half_bytes", "send_recv_s_half_bytes"):
            if not getattr(self, name) >= 0:
                raise SpecError(f"{name} must be >= 0", field=name)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveTable:
    """All curves of one GPU type inside a node, plus the network priors across nodes."""

    gpu: str
    link: LinkKind
    """Intra-node topology these curves were measured on (``switch`` or ``mesh``)."""
    curves: tuple[CollectiveCurve, ...]
    network: NetworkPriors
    mesh_link_bytes_per_s: float | None = None
    """Usable busbw of one direct link (``mesh`` only): a group of n gets (n - 1) links."""

    def __post_init__(self) -> None:
        ops = {c.op for c in self.curves}
        missing = [op for op in COLLECTIVE_OPS if op not in ops]
        if missing:
            raise SpecError(
                f"collective table of {self.gpu} has no curve for {', '.join(missing)}",
                field="curves",
            )
        if self.link == "mesh" and not self.mesh_link_bytes_per_s:
            raise SpecError(
                "a mesh table needs mesh_link_bytes_per_s (usable busbw of one direct link)",
                field="mesh_link_bytes_per_s",
            )

    def curve(self, op: CollectiveOp, n: int) -> CollectiveCurve:
        """The intra-node curve fitted on the largest group size <= n (the smallest if none)."""
        own = sorted((c for c in self.curves if c.op == op), key=lambda c: c.group_size)
        below = [c for c in own if c.group_size <= n]
        return below[-1] if below else own[0]

    def intra_params(self, op: CollectiveOp, n: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(beta_max, S_half) per element of ``n`` inside one node.

        On a switch, every group uses the curve of its size. On a mesh a group of n ranks drives
        only its n - 1 direct links (catalog-facts §2.3: one link per peer pair), so beta_max
        is capped by (n - 1) x the usable link rate (one link for a send/recv).
        """
        sizes = np.asarray(n, dtype=np.float64)
        ints = np.maximum(sizes.astype(np.int64), 0)
        beta_lut, half_lut = _curve_lookup(self, op, int(ints.max(initial=1)))
        beta, half = beta_lut[ints], half_lut[ints]  # one take per call, no loop per size
        if self.link == "mesh" and self.mesh_link_bytes_per_s:
            links = np.ones_like(sizes) if op == "send_recv" else np.maximum(sizes - 1.0, 1.0)
            beta = np.minimum(beta, links * self.mesh_link_bytes_per_s)
        return beta, half

    def network_params(
        self,
        op: CollectiveOp,
        members_per_node: FloatArray,
        nic_bytes_per_s: float,
    ) -> tuple[FloatArray, FloatArray]:
        """(beta_max, S_half) of a group that spans nodes (§2.3, performance-facts §4.4)."""
        g = np.asarray(members_per_node, dtype=np.float64)
        net = self.network
        if op == "all_to_all":
            beta = net.all_to_all_efficiency * nic_bytes_per_s * np.ones_like(g)
            half = net.all_to_all_s_half_bytes
        elif op == "send_recv":
            beta = net.send_recv_efficiency * nic_bytes_per_s * np.ones_like(g)
            half = net.send_recv_s_half_bytes
        else:
            beta = net.ring_efficiency * g * nic_bytes_per_s
            half = net.ring_s_half_bytes
        # a ring across nodes never beats the same ring inside one node
        intra_beta, _ = self.intra_params(op, np.maximum(g, 2.0))
        return np.minimum(beta, intra_beta), np.full_like(g, half)


@lru_cache(maxsize=256)
def _curve_lookup(
    table: CollectiveTable, op: CollectiveOp, top: int
) -> tuple[FloatArray, FloatArray]:
    """(beta_max, S_half) of ``table.curve(op, n)`` for n = 0 .. top, as arrays to index."""
    curves = [table.curve(op, n) for n in range(top + 1)]
    return (
        np.array([c.beta_max_bytes_per_s for c in curves], np.float64),
        np.array([c.s_half_bytes for c in curves], np.float64),
    )


def group_params(
    table: CollectiveTable,
    op: CollectiveOp,
    n: FloatArray,
    members_per_node: FloatArray,
    nic_bytes_per_s: float,
) -> tuple[FloatArray, FloatArray]:
    """(beta_max, S_half) of groups of ``n`` ranks with ``members_per_node`` of them per node.

    A group whose members all share a node (members_per_node >= n) uses the intra-node curve;
    one that spans nodes is bounded by the network (its ring or its slowest hop).
    """
    size = np.asarray(n, dtype=np.float64)
    g = np.minimum(np.asarray(members_per_node, dtype=np.float64), size)
    intra_beta, intra_half = table.intra_params(op, size)
    net_beta, net_half = table.network_params(op, g, nic_bytes_per_s)
    inside = g >= size
    return (
        np.asarray(np.where(inside, intra_beta, net_beta), np.float64),
        np.asarray(np.where(inside, intra_half, net_half), np.float64),
    )


def group_collective_time(
    table: CollectiveTable,
    op: CollectiveOp,
    n: FloatArray,
    members_per_node: FloatArray,
    size_bytes: FloatArray,
    nic_bytes_per_s: float,
) -> FloatArray:
    """Seconds of one collective of S bytes (nccl-tests size) per group, vectorised."""
    beta, half = group_params(table, op, n, members_per_node, nic_bytes_per_s)
    return collective_time(op, n, size_bytes, beta, half)
