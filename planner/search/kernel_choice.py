"""The planner's choice of the MoE expert-GEMM kernel where the job leaves it open (issue 12 item
1: "the search chooses the stack settings too, where they are the planner's to choose").

``moe_grouped_gemm_kernel`` None means: TE's default path (one cuBLAS GEMM per local expert on 4
streams, ``multi_stream``) unless one grouped kernel exists for the GPU, the precision and the
job's Transformer Engine (CUTLASS on Hopper bf16/fp16 from TE 2.8, cuBLASLt grouped GEMM from 2.13,
never under fp8 delayed scaling: :func:`planner.space.version_rules.grouped_kernel_missing`) and
runs the search's best candidates faster. Both compute the same GEMMs (mechanisms-facts §4.1),
so only speed decides. The kernel is an environment switch for the whole run, so it is chosen
per scenario (one cluster x one job): the kernel of the most tokens/s among the scenario's best
candidates, grouped only where it gains at least :data:`MIN_KERNEL_GAIN`; the scenario's job
then carries the choice (every plan states it in ``run`` and launches with it).
"""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from planner.layouts import IntArray
from planner.performance.step_time import PerformanceProfile, estimate_performance
from planner.space.version_rules import grouped_kernel_missing
from planner.specs import ModelSpec
from planner.stack_settings import MoeGroupedGemmKernel

if TYPE_CHECKING:
    from planner.search.sampling import CandidatePool
    from planner.search.screening import Scenario

__all__ = ["MIN_KERNEL_GAIN", "choose_kernel"]

MIN_KERNEL_GAIN = 0.01
"""Grouped replaces TE's default only where the best candidate gains at least 1 %: below the
model's cross-validated error a gain is noise, and the default needs no environment switch."""


def choose_kernel(
    model: ModelSpec,
    scenarios: MutableSequence[Scenario],
    pool: CandidatePool,
    profile: PerformanceProfile,
    idx: IntArray,
) -> dict[str, int] | None:
    """Give every scenario whose job leaves the kernel open the faster one for the pool's
    layouts ``idx`` (priced with TE's default); updates the scenarios' jobs and the pool's
    tokens/s in place and returns how many of those layouts run each kernel (None when no
    scenario left it open or the model has no experts)."""
    if not model.is_moe:
        return None
    counts: dict[str, int] = {}
    for s, sc in enumerate(scenarios):
        if sc.job.moe_grouped_gemm_kernel is not None:
            continue
        sub = idx[pool.scenario[idx] == s]
        kernel: MoeGroupedGemmKernel = "multi_stream"
        if len(sub) and grouped_kernel_missing(sc.job, sc.cluster.gpu) is None:
            grouped_job = replace(sc.job, moe_grouped_gemm_kernel="grouped")
            perf = estimate_performance(
                model, sc.cluster, grouped_job, pool.batch.take(sub), profile
            )
            tps = np.nan_to_num(np.asarray(perf.tokens_per_s_per_gpu, np.float64), nan=0.0)
            base = pool.tokens_per_s_per_gpu[sub]
            if tps.max() > base.max() * (1.0 + MIN_KERNEL_GAIN):
                kernel = "grouped"
                pool.tokens_per_s_per_gpu[sub] = tps
        scenarios[s] = replace(sc, job=replace(sc.job, moe_grouped_gemm_kernel=kernel))
        if len(sub):
            counts[kernel] = counts.get(kernel, 0) + len(sub)
    return counts or None
