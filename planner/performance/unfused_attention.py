"""HBM traffic of Megatron's unfused core attention (``--attention-backend unfused``, and the
2021-22 Megatron of the Narayanan and Korthikanti runs): the a x s x s score matrix per sequence.

The unfused path is ``baddbmm`` (Q K^T) -> fused scale-mask-softmax -> dropout -> ``bmm`` (x V).
Each step reads and writes the whole score matrix through HBM; Korthikanti et al. 2022 §4 lists
what it keeps for backward (megatron-facts §7.1: softmax output 2as^2b, dropout mask as^2b,
dropout output 2as^2b bytes, i.e. the full square, no causal halving). Counting every read and
write of those tensors, in bytes per score (one query x key x head):

forward: Q K^T writes the scores (2); the softmax reads them and writes its output (2 + 2); the
bmm with V reads the probabilities (2): 8. With attention dropout, dropout reads the softmax
output and writes its output and a 1-byte mask (2 + 2 + 1): 13.

backward: dV = P^T dO reads the probabilities (2); dP = dO V^T writes their gradient (2); softmax
backward reads it and the saved softmax output and writes (2 + 2 + 2); dQ = dS K and dK = dS^T Q
each read dS (2 + 2): 14. With dropout, its backward reads the gradient and the mask and writes
(2 + 1 + 2): 19.

The traffic grows as a x s per token against 24 h^2 GEMM FLOPs per token, i.e. as s / (h d): at
h = 2304, s = 2048, t = 1 it is about two thirds of the layer's GEMM time, at h = 12288, t = 8
about a seventh
(bench/results/small_models.md).
"""

from __future__ import annotations

import numpy as np

from planner.layouts import FloatArray

SOFTMAX_BYTES_FWD = 8.0  # megatron-facts §7.1: scores 2 + softmax read/write 4 + PV read 2
SOFTMAX_BYTES_BWD = 14.0  # the same tensors read/written by backward (module docstring)
DROPOUT_BYTES_FWD = 5.0  # megatron-facts §7.1: dropout output 2as^2b + mask as^2b, + the read 2
DROPOUT_BYTES_BWD = 5.0  # read the gradient 2 + the mask 1, write 2


def score_bytes(*, attention_dropout: bool) -> float:
    """HBM bytes per attention score, forward + backward, of the unfused path: 22, or 32 with
    attention dropout (megatron-facts §7.1: what Korthikanti §4 keeps, read and written)."""
    drop = DROPOUT_BYTES_FWD + DROPOUT_BYTES_BWD if attention_dropout else 0.0
    return SOFTMAX_BYTES_FWD + SOFTMAX_BYTES_BWD + drop


def forward_fraction(*, attention_dropout: bool) -> float:
    """Share of the forward in the bytes per score: what a recompute replays (8/22 or 13/32)."""
    fwd = SOFTMAX_BYTES_FWD + (DROPOUT_BYTES_FWD if attention_dropout else 0.0)
    return fwd / score_bytes(attention_dropout=attention_dropout)


def unfused_score_seconds(
    *,
    heads_per_gpu: FloatArray | float,
    seq_len: FloatArray | float,
    tokens: FloatArray | float,
    hbm_bytes_per_s: FloatArray | float,
    attention_dropout: bool,
    extra_bytes_per_score: float = 0.0,
) -> FloatArray:
    """Forward + backward seconds of the score-matrix traffic of one layer for ``tokens`` tokens
    on one GPU: every token's query row meets ``seq_len`` keys in each of its heads (the full
    square: the unfused path masks, it does not skip, megatron-facts §7.1).
    ``extra_bytes_per_score``: the profile's fitted correction (0 in shipped profiles)."""
    scores = np.asarray(heads_per_gpu, np.float64) * seq_len * np.asarray(tokens, np.float64)
    return np.asarray(
        (score_bytes(attention_dropout=attention_dropout) + extra_bytes_per_score)
        * scores
        / hbm_bytes_per_s,
        np.float64,
    )
