"""Fine-grained activation offload (``--fine-grained-activation-offloading --offload-modules``).

Megatron core >= 0.16 moves the *input* a chosen module saves for backward to host memory on a
D2H stream during the forward and brings it back on an H2D stream before the module's backward
(mechanisms-facts §6.5). This module prices it:

* memory: the offloaded module inputs of every layer and in-flight micro-batch leave the GPU,
  except tensors under 1 M elements (skipped by Megatron) and the last layer's groups, which
  stay on the GPU because their backward starts at once [inferred from "the last groups stay
  on GPU"]; layers that full recompute checkpoints save only their input, so nothing of theirs
  is offloaded;
* time: each direction of a layer's transfer overlaps with the compute of the block whose
  modules it belongs to (attention or MLP); only the part beyond that compute is exposed.

Tensor sizes: :mod:`planner.offload_bytes`; the bytes are capped by what the rank saves.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import FloatArray, LayoutBatch
from planner.offload_bytes import offloaded_bytes
from planner.specs import ModelSpec

__all__ = ["layer_offload_bytes", "stage_offload_bytes"]


def layer_offload_bytes(
    model: ModelSpec,
    seq_length: int,
    batch: LayoutBatch,
    *,
    moe: bool,
    imbalance: float,
    fp8: bool,
    recomputed_share: FloatArray,
) -> FloatArray:
    """Bytes one layer of one micro-batch moves to the host; layers that full recompute
    checkpoints keep only their input, which no offloaded module owns."""
    attention, mlp = offloaded_bytes(
        model, seq_length, batch, moe=moe, imbalance=imbalance, fp8=fp8
    )
    result: FloatArray = (attention + mlp) * (1.0 - recomputed_share)
    return result


def stage_offload_bytes(
    per_dense: FloatArray, per_moe: FloatArray, act_dense: FloatArray, act_moe: FloatArray
) -> FloatArray:
    """A rank's offloaded activation bytes: every saved layer's share, less the last layer's,
    whose groups stay on the GPU (mechanisms-facts §6.5)."""
    total = per_dense * act_dense + per_moe * act_moe
    kept = np.where(act_moe > 0, per_moe, per_dense)
    result: FloatArray = np.maximum(total - kept, 0.0)
    return result
