"""What a search optimises: job throughput, time to train a token budget, or its dollar cost.

Every objective is a vectorised function of per-GPU throughput and GPU count, so that the search
scores thousands of layouts (possibly on different cluster sizes) in one numpy expression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from planner.specs import SpecError

FloatArray = npt.NDArray[np.float64]
ObjectiveKind = Literal["throughput", "time_to_train", "cost"]
OBJECTIVE_KINDS: tuple[ObjectiveKind, ...] = ("throughput", "time_to_train", "cost")

SECONDS_PER_DAY = 86_400.0
SECONDS_PER_HOUR = 3_600.0

_UNITS: dict[str, str] = {"throughput": "tokens/s", "time_to_train": "days", "cost": "USD"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Objective:
    """The quantity a plan is ranked by.

    * ``throughput``: maximise tokens/s of the whole job (tokens/s per GPU x GPUs).
    * ``time_to_train``: minimise days to train ``token_budget`` tokens.
    * ``cost``: minimise dollars to train ``token_budget`` tokens at ``usd_per_gpu_hour``.
      Cost depends on per-GPU throughput only, so it prefers the more efficient (often smaller)
      cluster, where throughput and time to train prefer the larger one.
    """

    kind: ObjectiveKind = "throughput"
    token_budget: float | None = None
    """Tokens to train; required for time_to_train and cost (e.g. 15e12 for Llama-3.1)."""
    usd_per_gpu_hour: float | None = None
    """Price of one GPU for one hour; required for cost."""

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVE_KINDS:
            raise SpecError(
                f"objective kind={self.kind!r} is not one of {', '.join(OBJECTIVE_KINDS)}",
                field="objective",
            )
        for name in ("token_budget", "usd_per_gpu_hour"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(f"{name}={value!r} must be a number", field=name)
            if not math.isfinite(value) or value <= 0:
                raise SpecError(f"{name}={value} must be a positive number", field=name)
        if self.kind in ("time_to_train", "cost") and self.token_budget is None:
            raise SpecError(
                f"objective {self.kind!r} needs token_budget (tokens to train, e.g. 1e12)",
                field="token_budget",
            )
        if self.kind == "cost" and self.usd_per_gpu_hour is None:
            raise SpecError(
                "objective 'cost' needs usd_per_gpu_hour (the price of one GPU for one hour, "
                "e.g. 2.5)",
                field="usd_per_gpu_hour",
            )

    @property
    def direction(self) -> Literal["maximize", "minimize"]:
        return "maximize" if self.kind == "throughput" else "minimize"

    @property
    def unit(self) -> str:
        return _UNITS[self.kind]

    def values(self, tokens_per_s_per_gpu: npt.ArrayLike, num_gpus: npt.ArrayLike) -> FloatArray:
        """The objective in its natural unit (tokens/s, days or USD); inf where throughput is 0."""
        per_gpu = np.asarray(tokens_per_s_per_gpu, dtype=np.float64)
        gpus = np.asarray(num_gpus, dtype=np.float64)
        total = per_gpu * gpus
        if self.kind == "throughput":
            return np.where(np.isfinite(total) & (total > 0), total, 0.0)
        return self._budget_values(per_gpu, gpus)

    def score(self, tokens_per_s_per_gpu: npt.ArrayLike, num_gpus: npt.ArrayLike) -> FloatArray:
        """Higher is better whatever the kind: the value, negated for minimised kinds."""
        values = self.values(tokens_per_s_per_gpu, num_gpus)
        return values if self.direction == "maximize" else -values

    def worst_value(self) -> float:
        """A value worse than any real layout's, told to the sampler for infeasible trials."""
        return -1.0 if self.direction == "maximize" else 1e300

    def _budget_values(self, per_gpu: FloatArray, gpus: FloatArray) -> FloatArray:
        assert self.token_budget is not None  # checked in __post_init__
        ok = np.isfinite(per_gpu) & (per_gpu > 0) & (gpus > 0)
        safe = np.where(ok, per_gpu * gpus, 1.0)
        seconds = self.token_budget / safe
        if self.kind == "time_to_train":
            out = seconds / SECONDS_PER_DAY
        else:
            assert self.usd_per_gpu_hour is not None
            # GPU-hours = seconds x GPUs / 3600, independent of cluster size at equal efficiency
            out = seconds * gpus / SECONDS_PER_HOUR * self.usd_per_gpu_hour
        return np.where(ok, out, np.inf)

    def describe(self, tokens_per_s_per_gpu: float, num_gpus: int) -> dict[str, Any]:
        """The JSON ``objective`` part of one plan: its value plus the derived totals."""
        per_gpu = np.array([tokens_per_s_per_gpu], dtype=np.float64)
        gpus = np.array([num_gpus], dtype=np.float64)
        value = float(self.values(per_gpu, gpus)[0])
        total = tokens_per_s_per_gpu * num_gpus
        out: dict[str, Any] = {
            "kind": self.kind,
            "value": value if math.isfinite(value) else None,
            "unit": self.unit,
            "direction": self.direction,
            "tokens_per_s": total,
        }
        if self.token_budget is not None and total > 0:
            seconds = self.token_budget / total
            out["token_budget"] = self.token_budget
            out["days"] = seconds / SECONDS_PER_DAY
            out["gpu_hours"] = seconds * num_gpus / SECONDS_PER_HOUR
            if self.usd_per_gpu_hour is not None:
                out["usd"] = out["gpu_hours"] * self.usd_per_gpu_hour
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "token_budget": self.token_budget,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
        }
