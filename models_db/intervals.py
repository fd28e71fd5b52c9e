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

__all__ = ["load_interval_table"]


@functools.lru_cache(maxsize=1)
def load_interval_table() -> IntervalTable | None:
    path = resources.files("models_db").joinpath("intervals", "throughput.json")
    if not path.is_file():
        return None
    return IntervalTable.from_dict(json.loads(path.read_text(encoding="utf-8")))
