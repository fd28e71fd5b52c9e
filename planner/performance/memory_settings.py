"""Time terms of the memory settings (issue 13): recompute replays, host offload, gradients.

* Selective recompute replays each ``--recompute-modules`` module's forward in backward
  (mechanisms-facts §6.4): ``core_attn`` the attention kernel, ``mlp`` the dense MLP, ``moe`` the
  whole MoE block including its dispatch and combine, ``shared_experts`` the shared experts,
  ``mla_up_proj`` MLA's up-projection GEMMs, ``moe_act`` and ``layernorm`` their memory-bound
  elementwise work. Full recompute with ``--recompute-num-layers N`` (block) replays the first N
  layers of every model chunk.
* Optimizer offload (``HybridDeviceOptimizer``, mechanisms-facts §6.6): the offloaded share's
  gradients go to the host and its parameters come back over the host link, and its Adam step runs
  on the host at the profile's ``host_optimizer_params_per_s``.
* Activation offload (legacy ``--cpu-offloading-num-layers``, §6.5): the offloaded layers'
  activations cross the host link twice per micro-batch, hidden behind the compute of the
  remaining layers; only what does not fit behind it is exposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from planner.layout_settings import MODULE_BITS, effective_modules, full_recompute_share
from planner.layouts import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, FloatArray, LayoutBatch
from planner.specs import ClusterSpec, ModelSpec, TrainingJob

if TYPE_CHECKING:
    from planner.performance.context import StepContext

__all__ = [
    "GRAD_REDUCE_BYTES",
    "ReplayParts",
    "activation_offload_time",
    "adam_bytes_per_param",
    "grad_reduce_bytes",
    "offloaded_activation_bytes",
    "optimizer_offload_seconds",
    "recompute_seconds",
]

GRAD_REDUCE_BYTES = 4.0  # megatron-facts §1.8: bf16 runs reduce gradients in fp32 by default
ADAM_BYTES_PER_PARAM = 34.0  # performance-facts §3.3: fused Adam 30 B + grad-norm 4 B
# bf16 moments and a 16-bit master remainder: m, v and master each move 2 bytes less on read and
# on write (3 x 2 x 2 = 12 B) [inferred from mechanisms-facts §6.6 byte counts]
ADAM_BF16_STATE_SAVING = 12.0
HOST_LINK_TRANSFER_BYTES = 6.0
"""Per offloaded parameter and step: fp32 gradient to the host (4) and bf16 parameter back (2)
[inferred from mechanisms-facts §6.6: the host runs the step for its share]."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayParts:
    """Forward seconds per layer and micro-batch of what a recompute module replays."""

    core_attn: FloatArray
    dense_mlp: FloatArray
    moe_block: FloatArray
    """Router, dispatch, experts, combine (communication included) of one MoE layer."""
    shared_experts: FloatArray
    mla_up_proj: FloatArray
    moe_act: FloatArray
    layernorm: FloatArray


def recompute_seconds(
    batch: LayoutBatch,
    parts: ReplayParts,
    *,
    dense_layers: FloatArray,
    moe_layers: FloatArray,
    layers_fwd: FloatArray,
) -> FloatArray:
    """Replay seconds per micro-batch on the busiest rank, for every recompute setting."""
    mask = effective_modules(batch)

    def on(name: str) -> FloatArray:
        result: FloatArray = ((mask & MODULE_BITS[name]) != 0).astype(np.float64)
        return result

    layers = dense_layers + moe_layers
    moe_block = on("moe")
    selective = (
        layers * (on("core_attn") * parts.core_attn + on("mla_up_proj") * parts.mla_up_proj)
        + layers * on("layernorm") * parts.layernorm
        + dense_layers * on("mlp") * parts.dense_mlp
        + moe_layers * moe_block * parts.moe_block
        + moe_layers * (1 - moe_block) * on("moe_act") * parts.moe_act
        + moe_layers * (1 - moe_block) * on("shared_experts") * parts.shared_experts
    )
    share = full_recompute_share(batch.mem, layers / batch.vpp)
    result: FloatArray = np.where(
        batch.recompute == RECOMPUTE_FULL,
        share * layers_fwd,
        np.where(batch.recompute == RECOMPUTE_SELECTIVE, selective, 0.0),
    )
    return result


def grad_reduce_bytes(batch: LayoutBatch, precision: str) -> FloatArray:
    """Bytes per gradient element in the DP reduction: 2 with ``--grad-reduce-in-bf16`` or fp16
    (megatron-facts §1.8, §4.3), else fp32."""
    half = batch.mem.grad_reduce_bf16 | (precision == "fp16")
    result: FloatArray = np.where(half, 2.0, GRAD_REDUCE_BYTES)
    return result


def adam_bytes_per_param(batch: LayoutBatch) -> FloatArray:
    result: FloatArray = np.where(
        batch.mem.optimizer_state_bf16,
        ADAM_BYTES_PER_PARAM - ADAM_BF16_STATE_SAVING,
        ADAM_BYTES_PER_PARAM,
    )
    return result


def optimizer_offload_seconds(
    cluster: ClusterSpec,
    batch: LayoutBatch,
    local_params: FloatArray,
    host_params_per_s: float,
) -> FloatArray:
    """Seconds per step the host share of the optimizer adds (transfers and the host step).

    Without a host link in the GPU spec no transfer is charged: the rules reject offload there.
    """
    fraction = batch.mem.optimizer_offload_fraction
    link = cluster.gpu.host_link_bandwidth_bytes_per_s
    moved = fraction * local_params
    transfer = moved * HOST_LINK_TRANSFER_BYTES / link if link else np.zeros_like(moved)
    result: FloatArray = transfer + moved / host_params_per_s
    return result


def activation_offload_seconds(
    cluster: ClusterSpec,
    model: ModelSpec,
    batch: LayoutBatch,
    offloaded_bytes: FloatArray,
    compute_mb: FloatArray,
) -> FloatArray:
    """Exposed host-link seconds per micro-batch of the legacy activation offload (§6.5)."""
    link = cluster.gpu.host_link_bandwidth_bytes_per_s
    if not link:
        return np.zeros_like(compute_mb)
    n = batch.mem.activation_offload_layers.astype(np.float64)
    rest = np.maximum(model.num_layers - n, 0.0) / model.num_layers
    transfer = 2.0 * offloaded_bytes / link  # out in forward, back in backward
    result: FloatArray = np.maximum(transfer - rest * compute_mb, 0.0)
    return result


def offloaded_activation_bytes(
    model: ModelSpec, job: TrainingJob, batch: LayoutBatch
) -> FloatArray:
    """Saved bytes of the offloaded layers for one micro-batch (offload excludes recompute):
    34 s b h / t per layer with flash attention and SP (Korthikanti Table 2, the 5as/h score
    term gone), the memory model's own count being finer but of the same size."""
    n = np.minimum(batch.mem.activation_offload_layers, model.num_layers).astype(np.float64)
    tokens = job.seq_length / batch.cp * batch.micro_batch_size
    shard = np.where(batch.sequence_parallel & (batch.tp > 1), batch.tp, 1)
    result: FloatArray = n * 34.0 * tokens * model.hidden_size / shard
    return result


def activation_offload_time(ctx: StepContext, compute_mb: FloatArray) -> FloatArray:
    """Exposed seconds per micro-batch of the legacy activation offload of one step context."""
    offloaded = offloaded_activation_bytes(ctx.model, ctx.job, ctx.batch)
    return activation_offload_seconds(ctx.cluster, ctx.model, ctx.batch, offloaded, compute_mb)
