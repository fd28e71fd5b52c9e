"""What recompute makes the host launch again in the backward (megatron-facts §1.6,
mechanisms-facts §6.4), for the host term.

A checkpointed module's forward runs again right before its backward: every kernel in it is
launched again from Python (§3.1), and a replayed MoE dispatch (the ``moe`` module, or full
recompute of a MoE layer) computes its split sizes again, with the device-to-host sync that
needs (§3.3) [inferred: the replay re-runs the dispatcher's preprocessing]. MLM-DSV3 states the
effect: dropping the MLA up-projection's recompute gained +44.7 TFLOP/s because "its replay was
host-bound" (§3.5). The GPU seconds of the replays are the recompute term's; here they are only
placed in the backward's kernel groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layout_settings import MODULE_BITS, effective_modules, full_recompute_share
from planner.layouts import RECOMPUTE_FULL, FloatArray, IntArray
from planner.performance.context import StepContext
from planner.performance.host_overhead import LayerKernels
from planner.performance.host_segments import ReplayLaunches
from planner.performance.memory_settings import ReplayParts

LAYERNORM_REPLAY = 2  # input_layernorm and pre_mlp_layernorm (§6.4 `layernorm`)
UP_PROJ_REPLAY = 3  # the q and kv up-projections and their RoPE (§6.4 `mla_up_proj`) [inferred]
ACT_REPLAY = 1  # the expert activation (§6.4 `moe_act`)
DENSE_MLP_REPLAY = 5  # FC1 (with its AG), activation, FC2 (with its RS) (§6.4 `mlp`, §3.2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplaySettings:
    """Per layout: what recompute replays (module bits, the share of layers under full
    recompute) and the CP size (the attention replay's ring kernels)."""

    modules: IntArray
    full_share: FloatArray
    cp: FloatArray


def replay_settings(ctx: StepContext) -> ReplaySettings:
    batch = ctx.batch
    full = np.asarray(batch.recompute == RECOMPUTE_FULL, np.float64)
    # full recompute checkpoints the first N layers of each chunk (recompute_seconds' share)
    full = full * full_recompute_share(batch.mem, ctx.layers_per_stage / batch.vpp)
    return ReplaySettings(
        modules=effective_modules(batch), full_share=full, cp=np.asarray(ctx.cp, np.float64)
    )


def replay_launches(
    settings: ReplaySettings,
    parts: ReplayParts,
    recompute_mb: FloatArray,
    *,
    dense_k: LayerKernels,
    moe_k: LayerKernels | None,
    per_layer_fwd: FloatArray,
    eager_share: FloatArray,
    router_share: FloatArray,
    dense_n: FloatArray,
    moe_n: FloatArray,
) -> ReplayLaunches:
    """Per-layer replays of every layout: kernel counts by module, GPU seconds scaled so that
    the rank's replays take ``recompute_mb`` (the recompute term)."""
    mask = settings.modules

    def on(name: str) -> FloatArray:
        return np.asarray((mask & MODULE_BITS[name]) != 0, np.float64)

    full = settings.full_share
    # one attention call; with CP the ring's c calls, c-1 send/recv pairs and ~2c corrections
    # (mechanisms-facts §3.2: dense_layer_kernels' CP kernels)
    cp = settings.cp
    attn_call = 1.0 + np.where(cp > 1, (cp - 1.0) + (cp - 1.0) + 2.0 * cp, 0.0)
    sel_attn_k = (
        on("core_attn") * attn_call
        + on("layernorm") * LAYERNORM_REPLAY
        + on("mla_up_proj") * UP_PROJ_REPLAY
    )
    sel_attn_s = (
        on("core_attn") * parts.core_attn
        + on("layernorm") * parts.layernorm
        + on("mla_up_proj") * parts.mla_up_proj
    )
    dense_k_n = full * dense_k.fwd + (1 - full) * (sel_attn_k + on("mlp") * DENSE_MLP_REPLAY)
    dense_s = full * per_layer_fwd + (1 - full) * (sel_attn_s + on("mlp") * parts.dense_mlp)
    replay: dict[str, FloatArray | float] = dict(
        dense_kernels=dense_k_n, dense_gpu_s=dense_s, attn_kernels=(1 - full) * sel_attn_k,
        attn_gpu_s=(1 - full) * sel_attn_s,
    )  # fmt: skip
    if moe_k is not None:
        moe = (1 - full) * on("moe")
        alone = (1 - full) * (1 - on("moe"))
        shared = np.asarray(parts.shared_experts > 0, np.float64) * DENSE_MLP_REPLAY
        e, r = eager_share * per_layer_fwd, router_share * per_layer_fwd
        replay |= dict(
            full_attn_kernels=full * (moe_k.capturable_fwd - moe_k.router_fwd),
            full_attn_gpu_s=full * (per_layer_fwd - e - r),
            router_kernels=(full + moe) * moe_k.router_fwd,
            router_gpu_s=(full + moe) * r,
            eager_kernels=(full + moe) * moe_k.eager_fwd
            + alone * (on("moe_act") * ACT_REPLAY + on("shared_experts") * shared),
            eager_gpu_s=full * e + moe * np.maximum(parts.moe_block - r, 0.0)
            + alone * (on("moe_act") * parts.moe_act + on("shared_experts") * parts.shared_experts),
            sync_share=full + moe,
        )  # fmt: skip
    arrays = {k: np.asarray(v, np.float64) for k, v in replay.items()}
    priced = replayed_gpu_s(ReplayLaunches(**arrays), dense_n, moe_n)
    rec = np.asarray(recompute_mb, np.float64)
    scale = np.where(priced > 0, rec / np.maximum(priced, 1e-30), 0.0)
    for key in list(arrays):
        if key.endswith("_gpu_s"):
            arrays[key] = arrays[key] * scale
    # a recompute no module prices (none here): its GPU time stays in the backward, unlaunched
    unpriced = np.where(priced > 0, 0.0, rec / np.maximum(dense_n + moe_n, 1.0))
    arrays["dense_gpu_s"] = arrays["dense_gpu_s"] + unpriced
    arrays["attn_gpu_s"] = arrays["attn_gpu_s"] + unpriced
    return ReplayLaunches(**arrays)


def replayed_gpu_s(replay: ReplayLaunches, dense_n: FloatArray, moe_n: FloatArray) -> FloatArray:
    """GPU seconds of a rank's replays per micro-batch (= the recompute term where priced)."""
    moe = (
        np.asarray(replay.full_attn_gpu_s, np.float64)
        + replay.router_gpu_s
        + replay.eager_gpu_s
        + replay.attn_gpu_s
    )
    return np.asarray(dense_n * replay.dense_gpu_s + moe_n * moe, np.float64)
