"""The tensor-parallel collectives of a layer's backward pass, and what the GEMMs hide of them.

Without TE's userbuffers (``--tp-comm-overlap`` off, or a TP group that spans nodes), Megatron's
linear layers still overlap part of the backward TP traffic with the backward GEMMs
(``LinearWithGradAccumulationAndAsyncCommunication``, MCore 0.5 ``tensor_parallel/layers.py``;
TE's ``Linear``/``LayerNormLinear`` backward does the same; both rely on
``CUDA_DEVICE_MAX_CONNECTIONS=1``, megatron-facts rule 30, to queue the collective first):

* a column-parallel linear (QKV, FC1) with sequence parallelism keeps only its input's SP shard
  (mechanisms-facts §6.1) and re-gathers it in backward with an asynchronous all-gather that runs
  under its dgrad GEMM; its input gradient is then reduce-scattered asynchronously under its
  wgrad GEMM. Without SP that gradient is all-reduced asynchronously under the wgrad GEMM;
* a row-parallel linear (proj, FC2) all-gathers its output gradient (the conjugate of its
  forward reduce-scatter, Korthikanti et al. 2022 §4.2.2) before any GEMM can start: exposed.
  Without SP its backward has no collective.

So one block (attention or MLP) sends in backward 2 all-gathers + 1 reduce-scatter with SP, one
all-reduce without, not the 2 + 2 (2) of its forward; and only the row-parallel gather is
exposed whole. A dgrad or wgrad GEMM takes the forward GEMM's time (megatron-facts §5: backward
= 2 x forward), so the hidden part of each asynchronous collective is min(collective, GEMM).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockBackwardComm:
    """Backward TP seconds of one attention or MLP block on one GPU."""

    exposed_s: FloatArray
    """Seconds the block's backward waits on TP collectives."""
    hidden_s: FloatArray
    """Seconds of collectives that ran under the column-parallel dgrad / wgrad GEMMs."""


def block_backward_comm(
    *,
    all_gather_s: FloatArray,
    reduce_scatter_s: FloatArray,
    all_reduce_s: FloatArray,
    column_gemm_fwd_s: FloatArray,
    sequence_parallel: FloatArray,
) -> BlockBackwardComm:
    """Backward TP time of one block without userbuffers (module docstring: MCore 0.5
    ``layers.py``; mechanisms-facts §6.1). ``column_gemm_fwd_s`` is the forward time of the
    block's column-parallel GEMMs, the length of its dgrad and of its wgrad window."""
    window = np.asarray(column_gemm_fwd_s, np.float64)
    ag, rs, ar = (np.asarray(x, np.float64) for x in (all_gather_s, reduce_scatter_s, all_reduce_s))
    sp = np.asarray(sequence_parallel, np.float64) > 0
    # SP: row-parallel grad-output gather (exposed) + input re-gather under dgrad + RS under wgrad
    sp_exposed = ag + np.maximum(ag - window, 0.0) + np.maximum(rs - window, 0.0)
    sp_hidden = np.minimum(ag, window) + np.minimum(rs, window)
    # no SP: one all-reduce of the input gradient under wgrad
    ar_exposed = np.maximum(ar - window, 0.0)
    ar_hidden = np.minimum(ar, window)
    return BlockBackwardComm(
        exposed_s=np.asarray(np.where(sp, sp_exposed, ar_exposed), np.float64),
        hidden_s=np.asarray(np.where(sp, sp_hidden, ar_hidden), np.float64),
    )
