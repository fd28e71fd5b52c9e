"""Kernel counts of a MoE layer's router region and token permutation (mechanisms-facts §3.2,
§4.4): the one source of these counts for the host term (each kernel's launch,
:func:`planner.performance.host_overhead.moe_layer_kernels`) and the compute term (each
kernel's fixed GPU time, :mod:`planner.performance.moe_compute`), so DeepEP's fused layout
kernel changes both sides alike (``router_fusion`` is off on both: neither term passes it,
:mod:`planner.performance.host_term`'s stack decisions).

The layer's MLP half after the dispatch sync runs in three parts, in program order: the
dispatch (permute 1, the EP all-to-all of tokens and probs, permute 2), the experts, and the
combine (unpermute 2, the all-to-all back, unpermute 1); the backward runs them in reverse.
The flex dispatcher fuses permute 1 into its communication kernel (MLM-DSV3 §2.1.1) and
unpermute 1, the weighted sum over the top-k copies, into its combine: one permute op a side,
as its ~8 K h bytes per token count them (mechanisms-facts §4.4, moe_compute).
"""

from __future__ import annotations

from dataclasses import dataclass

ROUTER_UNFUSED = 72  # DSv3 MXFP8 router (mechanisms-facts §3.2: MLM-DSV3 §2.1.4)
ROUTER_FUSED = 31  # with --moe-router-fusion (same row)
ROUTER_DEEPEP = 17  # router + EP preprocess with DeepEP's fused layout kernel (MLM-DSV3 §2.2.1)
PREPROCESS_ALLTOALL = 6  # counts per expert, their all-gather over TP x EP, split sizes [inferred]
ROUTER_BWD_PER_FWD = 0.5  # score function, top-k and aux-loss backward: half the kernels [inferred]
PERMUTE_FUSED = 2  # per permute/unpermute with TE's fused kernels (row_id_map + gather) [inferred]
PERMUTE_UNFUSED = 6  # sort / index / gather chain of the unfused path [inferred]


@dataclass(frozen=True, slots=True, kw_only=True)
class SideKernels:
    """Kernels of one pass on each side of the experts (module doc), per MoE layer."""

    dispatch: float
    combine: float

    @property
    def total(self) -> float:
        return self.dispatch + self.combine


def router_region_kernels(*, flex: bool, router_fusion: bool = False) -> tuple[float, float]:
    """(forward, backward) kernels of the router region: the router and the alltoall
    dispatcher's preprocessing, or DeepEP's fused router + preprocess (§3.2)."""
    if flex:
        fwd = float(ROUTER_DEEPEP)
    else:
        fwd = float((ROUTER_FUSED if router_fusion else ROUTER_UNFUSED) + PREPROCESS_ALLTOALL)
    return fwd, fwd * ROUTER_BWD_PER_FWD


def permute_ops(*, flex: bool) -> SideKernels:
    """Permute / unpermute operations per pass: permute 1 and 2 before the experts, unpermute 2
    and 1 after them; flex fuses permute 1 into the dispatch kernel and unpermute 1 into the
    combine (§4.4: ~8 K h bytes per token, permute 2 and unpermute 2 only)."""
    each = 1.0 if flex else 2.0
    return SideKernels(dispatch=each, combine=each)


def permute_kernels(*, flex: bool, permute_fusion: bool) -> SideKernels:
    """Kernels of the permute operations per pass: TE's fused kernels, or Megatron's unfused
    chain where the release lacks ``--moe-permute-fusion`` (core 0.11 / TE 1.11, §8)."""
    per_op = float(PERMUTE_FUSED if permute_fusion else PERMUTE_UNFUSED)
    ops = permute_ops(flex=flex)
    return SideKernels(dispatch=ops.dispatch * per_op, combine=ops.combine * per_op)


def a2a_kernels(*, flex: bool) -> SideKernels:
    """All-to-all launches per pass: alltoall sends tokens, then probs, on the dispatch side and
    as many on the combine side [inferred]; flex runs one kernel each way (§4.4)."""
    each = 1.0 if flex else 2.0
    return SideKernels(dispatch=each, combine=each)
