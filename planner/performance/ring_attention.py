"""Context-parallel attention step by step (issue 12 item 4, mechanisms-facts §1.2-1.5).

Megatron cuts the sequence into 2c chunks and gives CP rank r chunks r and 2c-1-r (§1.1), so
every rank holds s_l = s / c tokens and the same causal work. What the attention of one layer
then costs depends on ``--cp-comm-type``:

* ``p2p`` (default, TE ``AttnFuncWithCPAndKVP2P``, §1.2): c kernel calls per layer forward and c
  per backward, each b s_l^2 / 2 query-key pairs; step 0 is the causal diagonal, steps 1..c-1
  are the lower triangle (s_l queries x s_l / 2 keys) or the upper one (s_l / 2 x s_l). K and V
  travel round the ring one hop per step, and the transfer of step i+1 overlaps the attention
  of step i; in backward [KV, dKV] travel the other way (KV at step 0, both at steps 1..c-2,
  dKV alone after the last step). Exposed time = sum over steps of max(0, t_comm - t_attn).
  After the loop every partial output is rescaled by its log-sum-exp and summed (a memory-bound
  pass over c partial outputs).
* ``all_gather`` (§1.3): one exposed all-gather of K and V, two causal calls; in backward the
  all-gather again and a reduce-scatter of dK, dV, all exposed.
* ``a2a`` (Ulysses, §1.4): all-to-alls of Q, K, V and O (dO, dQ, dK, dV in backward) swap the
  sequence split for a head split; one full-sequence call on a_l / c heads; nothing overlaps.
* ``a2a+p2p`` (§1.5): all-to-all in an inner group of c1, then the p2p ring over c2 = c / c1
  ranks on chunks of s / c2 tokens and a_l / c1 heads.

The rate of each kernel call comes from :mod:`planner.performance.attention_kernel` (a
plateau, a saturation in the keys each query row visits, and the wave efficiency of its CTAs
on the GPU's SMs). Link speeds are (beta_max, S_half) arrays from
:mod:`planner.performance.collective_bandwidth`; :func:`cp_attention_time` picks them from the
rank order. Everything is per layer and per micro-batch, vectorised over a batch of layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import BoolArray, FloatArray
from planner.performance.attention_kernel import AttentionKernel, attention_call_time
from planner.performance.collective_bandwidth import (
    CollectiveTable,
    collective_time,
    group_params,
)
from planner.specs import CP_COMM_TYPES, SpecError

LSE_BYTES = 4.0  # mechanisms-facts §1.2: log-sum-exp in fp32 per row and head


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionShape:
    """One layer's attention on one GPU, per micro-batch (arrays over layouts or scalars)."""

    batch: FloatArray
    """Micro-batch size b."""
    seq_length: FloatArray
    """Full sequence s (before CP)."""
    cp: FloatArray
    heads: FloatArray
    """Query heads per TP rank a_l = a / t."""
    kv_heads: FloatArray
    """KV heads per TP rank g_l = max(1, g / t)."""
    head_dim: float
    kv_bytes_per_element: float = 2.0
    """2 in bf16; 1 when Q/K/V travel in fp8 (fp8_dpa, mechanisms-facts §1.2)."""
    out_bytes_per_element: float = 2.0

    def __post_init__(self) -> None:
        for name in ("batch", "seq_length", "cp", "heads", "kv_heads"):
            if np.any(np.asarray(getattr(self, name)) <= 0):
                raise SpecError(f"{name} must be positive", field=name)
        for name in ("head_dim", "kv_bytes_per_element", "out_bytes_per_element"):
            if not getattr(self, name) > 0:
                raise SpecError(f"{name} must be positive", field=name)

    def arrays(self) -> tuple[FloatArray, ...]:
        return tuple(
            np.asarray(getattr(self, n), dtype=np.float64)
            for n in ("batch", "seq_length", "cp", "heads", "kv_heads")
        )


@dataclass(frozen=True, slots=True)
class CpAttentionTime:
    """Seconds per layer per micro-batch on one GPU; every array has one entry per layout."""

    fwd_attention_s: FloatArray
    """Kernel time on the critical path of the forward (the slower rank of each step)."""
    bwd_attention_s: FloatArray
    fwd_comm_s: FloatArray
    """Communication time of the forward, hidden or not."""
    bwd_comm_s: FloatArray
    fwd_exposed_s: FloatArray
    """Communication the attention did not hide."""
    bwd_exposed_s: FloatArray
    correction_s: FloatArray
    """Output/LSE correction after the ring (memory-bound)."""
    kernel_calls: FloatArray
    """Attention kernel calls per layer forward (the same number in backward)."""

    @property
    def fwd_s(self) -> FloatArray:
        return np.asarray(self.fwd_attention_s + self.fwd_exposed_s + self.correction_s)

    @property
    def bwd_s(self) -> FloatArray:
        return np.asarray(self.bwd_attention_s + self.bwd_exposed_s)

    @property
    def total_s(self) -> FloatArray:
        return np.asarray(self.fwd_s + self.bwd_s)


def kv_bytes_per_rank(shape: AttentionShape) -> FloatArray:
    """|KV_local| = 2 b s_l g_l d x bytes (mechanisms-facts §1.2)."""
    b, s, c, _, g = shape.arrays()
    return np.asarray(2.0 * b * (s / c) * g * shape.head_dim * shape.kv_bytes_per_element)


def _ring_step_times(
    kernel: AttentionKernel, shape: AttentionShape, backward: bool
) -> tuple[FloatArray, FloatArray]:
    """(diagonal step, off-diagonal step) kernel seconds of the p2p ring (§1.2 table)."""
    b, s, c, a, _ = shape.arrays()
    sl = s / c
    bh = b * a
    conc = np.where(c > 1, 2.0, 1.0)  # two streams alternate when there is more than one step

    def call(rows: FloatArray) -> FloatArray:
        return attention_call_time(
            kernel,
            batch_heads=bh,
            query_rows=rows,
            pairs=sl * sl / 2.0,
            head_dim=shape.head_dim,
            backward=backward,
            concurrent_calls=conc,
        )

    # the causal diagonal (s_l queries, s_l keys, half masked) and a lower-triangle step (s_l
    # queries x s_l / 2 keys) visit the same pairs with the same rows: one call prices both
    lower = call(sl)
    upper = call(sl / 2.0)  # s_l / 2 queries x s_l keys
    # ranks r >= i run the lower triangle and r < i the upper one; the ring waits for the slower
    return lower, np.asarray(np.maximum(lower, upper), np.float64)


def ring_p2p(
    kernel: AttentionKernel,
    shape: AttentionShape,
    *,
    p2p_beta_max: FloatArray,
    p2p_s_half: FloatArray,
    hbm_bytes_per_s: float,
) -> CpAttentionTime:
    """``--cp-comm-type p2p`` (mechanisms-facts §1.2); with c = 1 it is plain attention."""
    b, s, c, a, _ = shape.arrays()
    kv = kv_bytes_per_rank(shape)
    hop = collective_time("send_recv", 2.0, kv, p2p_beta_max, p2p_s_half)
    hop = np.where(c > 1, hop, 0.0)
    steps_after = np.maximum(c - 1.0, 0.0)
    f_diag, f_off = _ring_step_times(kernel, shape, backward=False)
    b_diag, b_off = _ring_step_times(kernel, shape, backward=True)
    fwd_attn = f_diag + steps_after * f_off
    bwd_attn = b_diag + steps_after * b_off
    # forward: the hop of step i+1 runs under the attention of step i, i = 0..c-2
    fwd_exposed = np.where(
        c > 1,
        np.maximum(hop - f_diag, 0.0) + np.maximum(c - 2.0, 0.0) * np.maximum(hop - f_off, 0.0),
        0.0,
    )
    # backward: step 0 sends KV, steps 1..c-2 send KV + dKV under their own attention; the
    # last step's dKV leaves after its attention, so nothing hides it
    double = collective_time("send_recv", 2.0, 2.0 * kv, p2p_beta_max, p2p_s_half)
    bwd_exposed = np.where(
        c > 1,
        np.maximum(hop - b_diag, 0.0)
        + np.maximum(c - 2.0, 0.0) * np.maximum(double - b_off, 0.0)
        + hop,
        0.0,
    )
    out = b * (s / c) * a * shape.head_dim
    # rescale c partial outputs by exp(LSE_step - LSE) and sum them: read c, write 1 (§1.2)
    corr_bytes = (c + 1.0) * out * shape.out_bytes_per_element + c * b * (s / c) * a * LSE_BYTES
    correction = np.where(c > 1, corr_bytes / hbm_bytes_per_s, 0.0)
    return CpAttentionTime(
        fwd_attention_s=np.asarray(fwd_attn, np.float64),
        bwd_attention_s=np.asarray(bwd_attn, np.float64),
        fwd_comm_s=np.asarray(steps_after * hop, np.float64),
        bwd_comm_s=np.asarray(np.where(c > 1, 2.0 * hop + np.maximum(c - 2.0, 0.0) * double, 0.0)),
        fwd_exposed_s=np.asarray(fwd_exposed, np.float64),
        bwd_exposed_s=np.asarray(bwd_exposed, np.float64),
        correction_s=np.asarray(correction, np.float64),
        kernel_calls=np.asarray(np.maximum(c, 1.0), np.float64),
    )


def _all_gather_calls(kernel: AttentionKernel, shape: AttentionShape, backward: bool) -> FloatArray:
    """Two causal calls of chunk length u = s / 2c against growing key prefixes (§1.3); the
    slower of the first and the last rank (their calls differ, their totals do not)."""
    b, s, c, a, _ = shape.arrays()
    u = s / (2.0 * c)
    worst = np.zeros_like(u)
    for r in (np.zeros_like(c), c - 1.0):
        total = np.zeros_like(u)
        for keys in ((r + 1.0) * u, (2.0 * c - r) * u):
            pairs = u * keys - u * u / 2.0  # causal only on the diagonal block
            total = total + attention_call_time(
                kernel,
                batch_heads=b * a,
                query_rows=u,
                pairs=pairs,
                head_dim=shape.head_dim,
                backward=backward,
                concurrent_calls=1.0,
            )
        worst = np.maximum(worst, total)
    return np.asarray(worst, np.float64)


def all_gather_kv(
    kernel: AttentionKernel,
    shape: AttentionShape,
    *,
    ag_beta_max: FloatArray,
    ag_s_half: FloatArray,
    rs_beta_max: FloatArray,
    rs_s_half: FloatArray,
) -> CpAttentionTime:
    """``--cp-comm-type all_gather`` (mechanisms-facts §1.3): every transfer is exposed."""
    _, _, c, _, _ = shape.arrays()
    gathered = c * kv_bytes_per_rank(shape)  # nccl-tests size of the all-gather: the whole K, V
    ag = collective_time("all_gather", c, gathered, ag_beta_max, ag_s_half)
    rs = collective_time("reduce_scatter", c, gathered, rs_beta_max, rs_s_half)
    fwd = _all_gather_calls(kernel, shape, backward=False)
    bwd = _all_gather_calls(kernel, shape, backward=True)
    zero = np.zeros_like(c)
    return CpAttentionTime(
        fwd_attention_s=fwd,
        bwd_attention_s=bwd,
        fwd_comm_s=ag,
        bwd_comm_s=np.asarray(ag + rs),
        fwd_exposed_s=ag,
        bwd_exposed_s=np.asarray(ag + rs),
        correction_s=zero,
        kernel_calls=np.where(c > 1, 2.0, 1.0),
    )


def a2a_supported(shape: AttentionShape, inner: FloatArray | None = None) -> BoolArray:
    """Ulysses needs a_l and g_l divisible by its all-to-all group (mechanisms-facts §1.4)."""
    _, _, c, a, g = shape.arrays()
    group = c if inner is None else np.asarray(inner, dtype=np.float64)
    return np.asarray((np.mod(a, group) == 0) & (np.mod(g, group) == 0), np.bool_)


def _a2a_exchange(
    shape: AttentionShape, group: FloatArray, beta_max: FloatArray, s_half: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of the all-to-alls: Q, K, V and O; dO, dQ, dK, dV (§1.4).

    nccl-tests' all-to-all size is each rank's whole send buffer: the local tensor.
    """
    b, s, c, a, g = shape.arrays()
    tok = b * (s / c) * shape.head_dim
    q = tok * a * shape.kv_bytes_per_element
    kv = tok * g * shape.kv_bytes_per_element
    o = tok * a * shape.out_bytes_per_element

    def t(size: FloatArray) -> FloatArray:
        return collective_time("all_to_all", group, size, beta_max, s_half)

    fwd = t(q) + 2.0 * t(kv) + t(o)
    bwd = t(o) + t(q) + 2.0 * t(kv)
    return np.asarray(fwd, np.float64), np.asarray(bwd, np.float64)


def ulysses_a2a(
    kernel: AttentionKernel,
    shape: AttentionShape,
    *,
    a2a_beta_max: FloatArray,
    a2a_s_half: FloatArray,
) -> CpAttentionTime:
    """``--cp-comm-type a2a`` (mechanisms-facts §1.4): inf where the heads do not divide."""
    b, s, c, a, _ = shape.arrays()
    fwd_comm, bwd_comm = _a2a_exchange(shape, c, a2a_beta_max, a2a_s_half)
    bh = b * a / c
    kw = {"batch_heads": bh, "query_rows": s, "pairs": s * s / 2.0, "head_dim": shape.head_dim}
    fwd = attention_call_time(kernel, **kw)  # type: ignore[arg-type]
    bwd = attention_call_time(kernel, backward=True, **kw)  # type: ignore[arg-type]
    ok = a2a_supported(shape)
    inf = np.full_like(s, np.inf)
    return CpAttentionTime(
        fwd_attention_s=np.where(ok, fwd, inf),
        bwd_attention_s=np.where(ok, bwd, inf),
        fwd_comm_s=fwd_comm,
        bwd_comm_s=bwd_comm,
        fwd_exposed_s=fwd_comm,
        bwd_exposed_s=bwd_comm,
        correction_s=np.zeros_like(s),
        kernel_calls=np.ones_like(s),
    )


def hierarchical_a2a_p2p(
    kernel: AttentionKernel,
    shape: AttentionShape,
    *,
    inner: FloatArray,
    a2a_beta_max: FloatArray,
    a2a_s_half: FloatArray,
    p2p_beta_max: FloatArray,
    p2p_s_half: FloatArray,
    hbm_bytes_per_s: float,
) -> CpAttentionTime:
    """``--cp-comm-type a2a+p2p`` (mechanisms-facts §1.5): all-to-all inside groups of
    ``inner`` = c1 ranks, then the p2p ring over c / c1 ranks with c1 x more tokens per step."""
    b, s, c, a, g = shape.arrays()
    c1 = np.asarray(inner, dtype=np.float64)
    fwd_a2a, bwd_a2a = _a2a_exchange(shape, c1, a2a_beta_max, a2a_s_half)
    ring_shape = AttentionShape(
        batch=b,
        seq_length=s,
        cp=c / c1,
        heads=a / c1,
        kv_heads=g / c1,
        head_dim=shape.head_dim,
        kv_bytes_per_element=shape.kv_bytes_per_element,
        out_bytes_per_element=shape.out_bytes_per_element,
    )
    ring = ring_p2p(
        kernel,
        ring_shape,
        p2p_beta_max=p2p_beta_max,
        p2p_s_half=p2p_s_half,
        hbm_bytes_per_s=hbm_bytes_per_s,
    )
    bad = ~a2a_supported(shape, c1)
    return CpAttentionTime(
        fwd_attention_s=np.where(bad, np.inf, ring.fwd_attention_s),
        bwd_attention_s=np.where(bad, np.inf, ring.bwd_attention_s),
        fwd_comm_s=np.asarray(ring.fwd_comm_s + fwd_a2a),
        bwd_comm_s=np.asarray(ring.bwd_comm_s + bwd_a2a),
        fwd_exposed_s=np.asarray(ring.fwd_exposed_s + fwd_a2a),
        bwd_exposed_s=np.asarray(ring.bwd_exposed_s + bwd_a2a),
        correction_s=ring.correction_s,
        kernel_calls=ring.kernel_calls,
    )


def ring_crosses_nodes(tp: FloatArray, cp: FloatArray, gpus_per_node: int) -> BoolArray:
    """CP ranks come right after TP in the rank order, so c x t > node puts the ring across
    nodes (mechanisms-facts §1.6)."""
    return np.asarray(np.asarray(tp) * np.asarray(cp) > gpus_per_node, np.bool_)


def cp_members_per_node(tp: FloatArray, cp: FloatArray, gpus_per_node: int) -> FloatArray:
    """CP ranks (stride t) that share one node."""
    per_node = np.maximum(gpus_per_node // np.maximum(np.asarray(tp, dtype=np.int64), 1), 1)
    return np.asarray(np.minimum(np.asarray(cp, dtype=np.float64), per_node), np.float64)


def cp_attention_time(
    comm_type: str,
    kernel: AttentionKernel,
    shape: AttentionShape,
    *,
    table: CollectiveTable,
    tp: FloatArray,
    gpus_per_node: int,
    nic_bytes_per_s: float,
    hbm_bytes_per_s: float,
    inner: FloatArray | None = None,
) -> CpAttentionTime:
    """One layer's attention with ``--cp-comm-type comm_type``, each transfer on the link the
    rank order gives it (CP right after TP, mechanisms-facts §1.6).

    The ring's step waits for its slowest hop, which crosses nodes whenever the CP group does;
    the all-gather and all-to-all use the group's collective curve (a ring that pools the NICs
    of its members per node, or one NIC per GPU for an all-to-all). ``a2a+p2p`` runs its
    all-to-all in groups of ``inner`` ranks (default: the CP ranks that share a node).
    """
    if comm_type not in CP_COMM_TYPES:
        raise SpecError(
            f"cp_comm_type={comm_type!r} is not one of {', '.join(CP_COMM_TYPES)}",
            field="cp_comm_type",
        )
    c = np.asarray(shape.cp, dtype=np.float64)
    members = cp_members_per_node(tp, c, gpus_per_node)

    def params(op: str, n: FloatArray, per_node: FloatArray) -> tuple[FloatArray, FloatArray]:
        return group_params(table, op, n, per_node, nic_bytes_per_s)  # type: ignore[arg-type]

    two = np.full_like(c, 2.0)
    hop_b, hop_h = params("send_recv", two, np.where(members >= c, 2.0, 1.0))
    if comm_type == "p2p":
        return ring_p2p(
            kernel, shape, p2p_beta_max=hop_b, p2p_s_half=hop_h, hbm_bytes_per_s=hbm_bytes_per_s
        )
    if comm_type == "all_gather":
        ag_b, ag_h = params("all_gather", c, members)
        rs_b, rs_h = params("reduce_scatter", c, members)
        return all_gather_kv(
            kernel, shape, ag_beta_max=ag_b, ag_s_half=ag_h, rs_beta_max=rs_b, rs_s_half=rs_h
        )
    if comm_type == "a2a":
        a2a_b, a2a_h = params("all_to_all", c, members)
        return ulysses_a2a(kernel, shape, a2a_beta_max=a2a_b, a2a_s_half=a2a_h)
    c1 = members if inner is None else np.asarray(inner, dtype=np.float64)
    in_b, in_h = params("all_to_all", c1, np.minimum(c1, members))
    return hierarchical_a2a_p2p(
        kernel,
        shape,
        inner=c1,
        a2a_beta_max=in_b,
        a2a_s_half=in_h,
        p2p_beta_max=hop_b,
        p2p_s_half=hop_h,
        hbm_bytes_per_s=hbm_bytes_per_s,
    )
