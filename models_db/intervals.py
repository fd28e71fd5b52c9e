"""Prediction intervals of the throughput model: ``models_db/intervals/throughput.json``.

Written by ``bench/calibration.py`` from leave-one-source-out (and, for transferred GPU
profiles, leave-one-GPU-type-out) residuals on the published measurements; read by
:class:`planner.calibration.intervals.IntervalTable`. None when the file is missing.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from planner.calibration.intervals import IntervalTable
from planner.calibration.level import new_cluster_noise
from planner.calibration.noise import NoiseModel

__all__ = ["cluster_level_noise", "load_interval_table"]


@functools.lru_cache(maxsize=1)
def load_interval_table() -> IntervalTable | None:
    path = resources.files("models_db").joinpath("intervals", "throughput.json")
    if not path.is_file():
        return None
    return IntervalTable.from_dict(json.loads(path.read_text(encoding="utf-8")))


def cluster_level_noise() -> NoiseModel:
    """The prior of a new cluster's level (the calibration's and ``--suggest``'s): its sigma_b
    is the shipped table's tau, the between-campaign sd its band uses for a campaign the fit
    never saw (``planner.calibration.level.new_cluster_noise``; the REML sigma_b without one)."""
    table = load_interval_table()
    return new_cluster_noise(None if table is None else table.transfer)
