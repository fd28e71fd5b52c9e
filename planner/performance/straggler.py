"""Stragglers: every step synchronises all GPUs, so GPU-bound time follows the slowest one.

Per-GPU speed spreads around its mean (performance-facts §8); the expected slowest of N GPUs
sits E[max of N normals] standard deviations above it (Blom's approximation).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from planner.layouts import FloatArray, IntArray
from planner.performance.context import StepContext


def expected_max_normal(n: IntArray) -> FloatArray:
    """Expected maximum of ``n`` standard normal draws (Blom's approximation; 0 for n = 1)."""
    values, inverse = np.unique(np.maximum(np.asarray(n, np.int64), 1), return_inverse=True)
    z = np.array([NormalDist().inv_cdf((v - 0.375) / (v + 0.25)) for v in values.tolist()])
    return np.asarray(z[inverse].reshape(np.shape(n)), np.float64)


def straggler_time(ctx: StepContext, gpu_bound_mb: FloatArray, gpus: FloatArray) -> FloatArray:
    """Seconds the slowest of the job's GPUs adds to one step.

    ``gpu_bound_mb`` is one micro-batch's compute + recompute; it waits for the slowest GPU in
    every micro-batch and in the bubble's (p-1)/v stage times.
    """
    slowest = ctx.profile.straggler_spread * expected_max_normal(gpus.astype(np.int64))
    m, pp, vpp = ctx.microbatches, ctx.pp, ctx.vpp
    return np.asarray(slowest * (m + (pp - 1) / vpp) * gpu_bound_mb, np.float64)
