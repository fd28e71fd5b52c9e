"""The throughput model: step time assembled from one term per module, and its profile."""

from planner.performance.profile import PerformanceProfile, default_profile
from planner.performance.step_time import BREAKDOWN_KEYS, PerformanceEstimate, estimate_performance

__all__ = [
    "BREAKDOWN_KEYS",
    "PerformanceEstimate",
    "PerformanceProfile",
    "default_profile",
    "estimate_performance",
]
