"""Overlap interference: hidden communication still slows the compute it hides behind.

A collective that runs under compute takes SMs and HBM bandwidth from it, so a fraction of the
hidden time comes back as compute slowdown (performance-facts §6, the profile's
``overlap_interference``). Every term that hides traffic (TP, CP, EP, PP, DP) charges
``interference(ctx, share) x hidden seconds``, where ``share`` is how much of the link the
group's traffic loads (:func:`planner.performance.collectives.link_share`).
"""

from __future__ import annotations

import numpy as np

from planner.layouts import FloatArray
from planner.performance.context import StepContext


def interference(ctx: StepContext, share: FloatArray) -> FloatArray:
    """Seconds of compute slowdown per second of hidden traffic on a link loaded ``share``."""
    return np.asarray(ctx.profile.overlap_interference * share, np.float64)
