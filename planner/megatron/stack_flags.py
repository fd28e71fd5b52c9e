"""Megatron flags of the job's software stack (:mod:`planner.stack_settings`), and their parser.

``--tp-comm-overlap`` is emitted by :func:`planner.megatron.flags.megatron_args` itself (it
depends on the layout); this module covers the attention backend, the cross-entropy kernel,
force-balanced MoE routing and fused MoE permutation, and reads the stack back from an argv;
:func:`stack_env` sets the environment that selects TE's grouped expert-GEMM kernel.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from planner.megatron.version_flags import (
    ATTENTION_ENV,
    attention_args,
    attention_env,
    grouped_kernel_env,
)
from planner.specs import GPUSpec, ModelSpec, TrainingJob
from planner.stack_versions import missing

__all__ = [
    "add_stack_arguments",
    "env_attention_backend",
    "parsed_stack_fields",
    "stack_args",
    "stack_env",
]

PERMUTE_FUSION_FLAG = "--moe-permute-fusion"
FORCE_BALANCE_FLAG = "--moe-router-force-load-balancing"
"""Megatron's benchmark switch: random router logits, so every expert gets the mean load
(NVIDIA's MoE benchmarks use it: performance-facts §5.3)."""


def stack_args(model: ModelSpec, job: TrainingJob) -> list[str]:
    """Flags of the attention backend, the cross-entropy kernel and forced MoE balance."""
    args = attention_args(job)  # the flag from core 0.11; TE's variables before (stack_env)
    if job.cross_entropy_fusion != "unfused":
        args.append("--cross-entropy-loss-fusion")  # core >= 0.8 (mechanisms-facts §8)
    if job.cross_entropy_fusion in ("te", "te_fp32_grad"):
        # core 0.12-0.18: 0.19 rejects the te impl with the fusion flag (mechanisms-facts §5.4)
        args += ["--cross-entropy-fusion-impl", "te"]
    if model.is_moe and job.moe_imbalance == 1.0:
        args.append(FORCE_BALANCE_FLAG)
    if model.is_moe and missing(job, "moe_permute_fusion", "true") is None:
        # the step time prices fused permutation (planner.performance.host_term); Megatron's
        # default is unfused, so the launch must ask for it (mechanisms-facts §3.3, §8)
        args.append(PERMUTE_FUSION_FLAG)
    return args


def stack_env(model: ModelSpec, gpu: GPUSpec, job: TrainingJob) -> dict[str, str]:
    """Environment of the job's stack: the grouped expert-GEMM kernel has no Megatron flag,
    only Transformer Engine switches (mechanisms-facts §4.1); before ``--attention-backend``
    (core 0.11) TE's attention switches select the backend (megatron-facts §1.10)."""
    env = attention_env(job)
    if not model.is_moe or job.moe_grouped_gemm_kernel != "grouped":
        return env
    # the kernels the job's TE has, NVIDIA only (planner.megatron.version_flags)
    return env | grouped_kernel_env(gpu, job)


def add_stack_arguments(p: argparse.ArgumentParser) -> None:
    """The stack flags (``--tp-comm-overlap`` and ``--attention-backend`` are added by the
    caller's parser)."""
    p.add_argument("--cross-entropy-loss-fusion", action="store_true")
    p.add_argument("--cross-entropy-fusion-impl", choices=("native", "te"), default="native")
    p.add_argument(FORCE_BALANCE_FLAG, action="store_true")
    p.add_argument(PERMUTE_FUSION_FLAG, action="store_true")
    p.add_argument("--moe-enable-deepep", action="store_true")  # core 0.12-0.15: flex = DeepEP


def env_attention_backend(env: Mapping[str, str]) -> str:
    """The backend TE's ``NVTE_FLASH_ATTN`` / ``NVTE_FUSED_ATTN`` select (a launch before core
    0.11, :data:`ATTENTION_ENV`); unset or both on = 'auto', TE's default choice."""
    chosen = {k: env.get(k, "1").strip() for k in ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN")}
    for backend, values in ATTENTION_ENV.items():
        if chosen == values:
            return backend
    return "auto"


def parsed_stack_fields(
    ns: argparse.Namespace, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """TrainingJob stack fields an argv states (and ``env``, its launch environment, where the
    argv has no ``--attention-backend``: TE's switches then choose). Without the force-balance
    flag the imbalance is the planner's default for auxiliary-loss routing (the argv cannot say
    more)."""
    from planner.stack_settings import DEFAULT_MOE_IMBALANCE

    fusion = "unfused"
    if ns.cross_entropy_loss_fusion:
        fusion = "te" if ns.cross_entropy_fusion_impl == "te" else "native"
    backend = ns.attention_backend if ns.attention_backend != "local" else "unfused"
    if ns.attention_backend is None:  # no flag: core < 0.11, or Megatron's default
        backend = env_attention_backend(env or {})
    return {
        "tp_comm_overlap": bool(ns.tp_comm_overlap),
        "attention_backend": backend,
        "cross_entropy_fusion": fusion,
        "moe_imbalance": 1.0 if ns.moe_router_force_load_balancing else DEFAULT_MOE_IMBALANCE,
    }
