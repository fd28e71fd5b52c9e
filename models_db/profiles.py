"""Default calibration profiles of the throughput model, one JSON file per GPU type.

``models_db/profiles/<gpu-slug>.json`` holds a
:class:`planner.performance.step_time.PerformanceProfile`
(coefficients + provenance). ``bench/fit_default_profiles.py`` regenerates them from the
published measurements; ``FIT_REPORT.md`` next to them says how. A GPU without a file gets the
architecture priors of :func:`planner.performance.step_time.default_profile`.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable

from planner.performance.step_time import PerformanceProfile, default_profile
from planner.specs import GPUSpec

__all__ = ["available_profiles", "load_profile"]


def _folder() -> Traversable:
    return resources.files("models_db").joinpath("profiles")


def available_profiles() -> list[str]:
    """GPU slugs that have a shipped profile file."""
    return sorted(
        p.name.removesuffix(".json") for p in _folder().iterdir() if p.name.endswith(".json")
    )


def load_profile(gpu: GPUSpec) -> PerformanceProfile:
    """The shipped profile of this GPU type, or the architecture priors when there is none."""
    path = _folder().joinpath(f"{gpu.name}.json")
    if not path.is_file():
        return default_profile(gpu)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["gpu"] = gpu.name
    return PerformanceProfile.from_dict(data)
