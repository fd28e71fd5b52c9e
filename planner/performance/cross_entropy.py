"""Cross-entropy on the last pipeline stage, fused or not (issue 12 item 7, mechanisms-facts §5).

The loss runs over the logits of the output layer: n = s_l x b x V / t elements per rank
(vocabulary split over TP, §5.1). It is memory-bound, so its time is HBM bytes over achieved
bandwidth, plus its TP collectives over rows (T = s_l x b rows, fp32 values) and a few kernel
launches. Per logit (bytes of HBM traffic, mechanisms-facts §5.2-5.4):

| implementation | forward | backward | TP collectives (forward) | held |
|---|---|---|---|---|
| ``unfused`` (vocab_parallel_cross_entropy) | 38, 6 passes | 14 | 3 all-reduces of T fp32 | 4 |
| ``native`` (--cross-entropy-loss-fusion) | 10, >= 3 passes | 6 | 2 all-reduces | 4 |
| ``te`` (TE 2.2-2.17, gradient in place) | 6 | 4 | 1 all-gather of 3 T fp32 | 2 |
| ``te_fp32_grad`` (TE 2.18) | 8 | 6 | 1 all-gather of 3 T fp32 | 4 |

"held" = bytes per logit kept for the backward (the fp32 softmax, or TE's in-place gradient).

The native row is a lower bound (the passes after torch.compile were not measured, §5.3,
§9.4); its backward reads the fp32 softmax (4) and writes the bf16 gradient (2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from planner.layouts import FloatArray
from planner.specs import SpecError

CrossEntropyImpl = Literal["unfused", "native", "te", "te_fp32_grad"]
CROSS_ENTROPY_IMPLS: tuple[CrossEntropyImpl, ...] = ("unfused", "native", "te", "te_fp32_grad")
ROW_BYTES = 4.0  # one fp32 value per row per reduction


@dataclass(frozen=True, slots=True, kw_only=True)
class CrossEntropyPasses:
    """HBM traffic and collectives of one implementation, per logit and per row."""

    fwd_bytes_per_logit: float
    bwd_bytes_per_logit: float
    held_bytes_per_logit: float
    """Kept from the loss forward until its backward (§5.5 B_ce)."""
    peak_bytes_per_logit: float
    """Most bytes alive at once, the bf16 logits included (unfused: the bf16 logits beside
    their fp32 copy, 2 + 4, §5.2)."""
    tp_all_reduces: int
    tp_all_gather_values: int
    """fp32 values per row all-gathered over TP (TE's online softmax statistics)."""
    kernels_fwd: int
    kernels_bwd: int


CROSS_ENTROPY_PASSES: dict[str, CrossEntropyPasses] = {
    # §5.2: cast 2+4, max 4, subtract 4+4, exp 4+4, sum 4, divide 4+4 = 38; bwd 4+4 + 4+2 = 14
    "unfused": CrossEntropyPasses(
        fwd_bytes_per_logit=38.0,
        bwd_bytes_per_logit=14.0,
        held_bytes_per_logit=4.0,
        peak_bytes_per_logit=2.0 + 4.0,
        tp_all_reduces=3,
        tp_all_gather_values=0,
        kernels_fwd=8,
        kernels_bwd=4,
    ),
    # §5.3: merged all-reduces (2), gradient emitted in bf16; >= 3 passes [inferred]
    "native": CrossEntropyPasses(
        fwd_bytes_per_logit=2.0 + 2.0 + 2.0 + 4.0,
        bwd_bytes_per_logit=4.0 + 2.0,
        held_bytes_per_logit=4.0,
        peak_bytes_per_logit=2.0 + 4.0,
        tp_all_reduces=2,
        tp_all_gather_values=0,
        kernels_fwd=3,
        kernels_bwd=1,
    ),
    # §5.4: two Triton kernels, gradient written in place into the bf16 logits (TE 2.2-2.17)
    "te": CrossEntropyPasses(
        fwd_bytes_per_logit=2.0 + 2.0 + 2.0,
        bwd_bytes_per_logit=2.0 + 2.0,
        held_bytes_per_logit=2.0,
        peak_bytes_per_logit=2.0,
        tp_all_reduces=0,
        tp_all_gather_values=3,
        kernels_fwd=2,
        kernels_bwd=1,
    ),
    # §5.4: TE 2.18 writes a separate fp32 gradient buffer
    "te_fp32_grad": CrossEntropyPasses(
        fwd_bytes_per_logit=2.0 + 2.0 + 4.0,
        bwd_bytes_per_logit=4.0 + 2.0,
        held_bytes_per_logit=4.0,
        peak_bytes_per_logit=2.0 + 4.0,
        tp_all_reduces=0,
        tp_all_gather_values=3,
        kernels_fwd=2,
        kernels_bwd=1,
    ),
}


def cross_entropy_passes(impl: str) -> CrossEntropyPasses:
    if impl not in CROSS_ENTROPY_PASSES:
        raise SpecError(
            f"cross_entropy_fusion={impl!r} is not one of {', '.join(CROSS_ENTROPY_IMPLS)}",
            field="cross_entropy_fusion",
        )
    return CROSS_ENTROPY_PASSES[impl]


def logits_per_rank(
    tokens: FloatArray | float, vocab_padded: FloatArray | float, tp: FloatArray | float
) -> FloatArray:
    """n = s_l x b x V / t logits on one rank of the last stage (mechanisms-facts §5.1)."""
    return np.asarray(
        np.asarray(tokens, dtype=np.float64) * np.asarray(vocab_padded) / np.asarray(tp),
        np.float64,
    )


@dataclass(frozen=True, slots=True)
class CrossEntropyTime:
    """Seconds per micro-batch on one last-stage rank, and the loss's memory."""

    fwd_s: FloatArray
    bwd_s: FloatArray
    held_bytes: FloatArray
    peak_bytes: FloatArray
    """Most bytes the logits and the loss hold at once (bf16 logits included)."""

    @property
    def total_s(self) -> FloatArray:
        return np.asarray(self.fwd_s + self.bwd_s, np.float64)


def cross_entropy_time(
    impl: str,
    *,
    tokens: FloatArray | float,
    vocab_padded: FloatArray | float,
    tp: FloatArray | float,
    hbm_bytes_per_s: float,
    collective_s: FloatArray | float = 0.0,
    kernel_s: float = 0.0,
) -> CrossEntropyTime:
    """Cross-entropy of one micro-batch on one rank (mechanisms-facts §5.2-5.5).

    ``hbm_bytes_per_s`` is the achieved bandwidth; ``collective_s`` the time of one of its TP
    collectives over the rows (the caller prices T x 4 B with the collective curves, 0 without
    TP); ``kernel_s`` a launch or fixed cost per kernel.
    """
    p = cross_entropy_passes(impl)
    n = logits_per_rank(tokens, vocab_padded, tp)
    colls = float(p.tp_all_reduces + (1 if p.tp_all_gather_values else 0))
    t_tp = np.where(np.asarray(tp) > 1, colls * np.asarray(collective_s), 0.0)
    fwd = n * p.fwd_bytes_per_logit / hbm_bytes_per_s + t_tp + p.kernels_fwd * kernel_s
    bwd = n * p.bwd_bytes_per_logit / hbm_bytes_per_s + p.kernels_bwd * kernel_s
    return CrossEntropyTime(
        fwd_s=np.asarray(fwd, np.float64),
        bwd_s=np.asarray(bwd, np.float64),
        held_bytes=np.asarray(n * p.held_bytes_per_logit, np.float64),
        peak_bytes=np.asarray(n * p.peak_bytes_per_logit, np.float64),
    )


def row_collective_bytes(impl: str, tokens: FloatArray | float) -> FloatArray:
    """nccl-tests size of one TP collective of the loss: T fp32 values per all-reduce, 3 T per
    rank for TE's all-gather (its size is the gathered total: x t, added by the caller)."""
    p = cross_entropy_passes(impl)
    per_row = ROW_BYTES * (p.tp_all_gather_values or 1)
    return np.asarray(np.asarray(tokens, dtype=np.float64) * per_row, np.float64)
