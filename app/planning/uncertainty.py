"""Each prediction's interval and extrapolation warnings (issue 12 item 9), added to the
performance block of evaluated layouts and of plans: ``tokens_per_s_per_gpu_interval`` and
``step_time_interval_s`` (the 80 % prediction band of leave-one-source-out residuals of the
layout's regime, :mod:`planner.calibration.interval_bands`) and ``extrapolation`` (reasons in
words; empty = inside the calibrated data).
The table is ``models_db/intervals/throughput.json``; without it nothing is added."""

from __future__ import annotations

from typing import Any

from models_db.intervals import load_interval_table
from planner import ClusterSpec, Layout, ModelSpec, PerformanceProfile, TrainingJob
from planner.calibration.intervals import uncertainty


def add_uncertainty(
    performance: dict[str, Any] | None,
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    layout: Layout,
    profile: PerformanceProfile,
) -> None:
    """Add the interval fields to one performance block (in place; no-op without a table)."""
    table = load_interval_table()
    if table is None or not performance:
        return
    tokens, step = performance.get("tokens_per_s_per_gpu"), performance.get("step_time_s")
    if tokens is None or step is None:
        return
    performance.update(
        uncertainty(
            table,
            model,
            cluster,
            job,
            layout,
            profile,
            tokens_per_s_per_gpu=float(tokens),
            step_time_s=float(step),
        )
    )
