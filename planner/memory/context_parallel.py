"""Transient memory of context-parallel attention by ``--cp-comm-type`` (issue 12 item 4), per
layout, vectorised.

What each variant holds while one layer's attention runs, beyond the tensors every variant saves
for backward (Q, K, V, O and the softmax statistics of s/c tokens, counted in
:mod:`planner.memory.activations`):

* ``all_gather`` (mechanisms-facts §1.3): the forward all-gathers the full-sequence K and V
  ("Transient memory: full-sequence K and V"); the backward all-gathers them again (only the
  local ones were saved) and reduce-scatters dK and dV, whose full-sequence buffers exist while
  the backward calls run [inferred from the reduce-scatter in §1.3]. The backward is the peak:
  2 x (K + V) of the whole sequence for the TP rank's KV heads.
* ``a2a`` (§1.4): the all-to-alls trade the sequence split for a head split, full s with a_l/c
  query heads and g_l/c KV heads per rank: the same number of elements as the local s/c x a_l
  tensors, so what is saved keeps its size [inferred from the shapes in §1.4]; the sheet states
  no transient beyond that, so none is charged.
* ``p2p`` (§1.2): the ring holds one received K/V chunk at a time, the size of the local K/V;
  the forward keeps every step's partial output and its log-sum-exp until the final correction
  ("All c partial outputs live until then: transient ~ c b s_l a_l d elements", LSE "FP32 per
  row and head"): c x b x s/c x a_l x d in bf16 plus c x b x s/c x a_l x 4 B, i.e. the
  full-sequence attention output of the TP rank's heads. That is a *forward* transient: it is
  gone before the layer's backward, so the layer's peak is the larger of it and the backward
  workspace (:func:`cp_peak_workspace`), not their sum.
* ``a2a+p2p`` (§1.5): the same ring over c2 ranks on a_l/c1 heads would hold 1/c1 of p2p's
  partials; c1 depends on the node size, which this estimate does not see, so nothing is
  charged (it is at most half of p2p's).

A layout whose ``cp_comm_type`` is open (None) is charged as p2p, Megatron's default; the search
re-checks the fit once it has chosen a type (:mod:`planner.search.cp_choice`).
"""

from __future__ import annotations

import numpy as np

from planner.layouts import CP_COMM_AUTO, FloatArray, LayoutBatch
from planner.specs import CP_COMM_TYPES, ModelSpec

__all__ = ["cp_attention_transient_bytes", "cp_forward_partials_bytes", "cp_peak_workspace"]

BF16 = 2.0
FP32 = 4.0
ALL_GATHER = CP_COMM_TYPES.index("all_gather")
P2P = CP_COMM_TYPES.index("p2p")


def cp_peak_workspace(
    workspace: FloatArray, model: ModelSpec, seq_length: int, batch: LayoutBatch
) -> FloatArray:
    """One layer's transient peak given its backward ``workspace`` (with what CP holds in the
    backward, :func:`cp_attention_transient_bytes`, already added): the p2p forward's partial
    outputs where they are larger (a forward and a backward transient are never live at once)."""
    return np.asarray(
        np.maximum(workspace, cp_forward_partials_bytes(model, seq_length, batch)), np.float64
    )


def cp_forward_partials_bytes(model: ModelSpec, seq_length: int, batch: LayoutBatch) -> FloatArray:
    """Bytes per GPU of the p2p ring's partial outputs and their LSE while one layer's forward
    attention runs (mechanisms-facts §1.2 "Correction"): c x b x s/c x a_l x (d_v x 2 B + 4 B);
    0 for the other types and where cp = 1. An open type counts as p2p (Megatron's default)."""
    codes = batch.cp_comm_codes
    ring = ((codes == P2P) | (codes == CP_COMM_AUTO)) & (batch.cp > 1)
    if not np.any(ring):
        return np.zeros(len(batch), dtype=np.float64)
    heads = model.num_attention_heads / batch.tp.astype(np.float64)  # a_l
    v_dim = (model.v_head_dim or 0) if model.multi_latent_attention else model.head_dim
    # c steps of s/c query rows each: s rows of a_l heads per micro-batch sample (§1.2)
    rows = batch.micro_batch_size.astype(np.float64) * seq_length * heads
    partials = rows * (BF16 * v_dim + FP32)
    return np.asarray(np.where(ring, partials, 0.0), np.float64)


def cp_attention_transient_bytes(
    model: ModelSpec, seq_length: int, batch: LayoutBatch
) -> FloatArray:
    """Bytes per GPU that one layer's CP attention holds at its peak, beyond the saved
    activations: the all-gathered full-sequence K and V plus their full-sequence gradients
    (``all_gather``, mechanisms-facts §1.3); 0 for the other types and where cp = 1."""
    gathered = (batch.cp_comm_codes == ALL_GATHER) & (batch.cp > 1)
    if not np.any(gathered):
        return np.zeros(len(batch), dtype=np.float64)
    t = batch.tp.astype(np.float64)
    b = batch.micro_batch_size.astype(np.float64)
    if model.multi_latent_attention:
        # MLA's K carries the nope and rope parts per head, V its own head dim (no KV groups)
        k_dim = (
            model.num_attention_heads
            / t
            * ((model.qk_head_dim or 0) + (model.qk_pos_emb_head_dim or 0))
        )
        v_dim = model.num_attention_heads / t * (model.v_head_dim or 0)
    else:
        kv_heads = np.maximum(model.query_groups / t, 1.0)  # replicated when g < t (§1.1 g_l)
        k_dim = v_dim = kv_heads * model.head_dim
    # full-sequence K and V of the TP rank's heads, bf16 (§1.3), and dK, dV of the same size
    kv_full = BF16 * b * seq_length * (k_dim + v_dim)
    return np.asarray(np.where(gathered, 2.0 * kv_full, 0.0), np.float64)
