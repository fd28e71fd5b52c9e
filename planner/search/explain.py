"""Why the best plan beats the runner-up, in one sentence computed from their numbers.

The step time is a sum of exposed components (``PerformanceEstimate.breakdown``: compute,
recompute, each parallelism's exposed communication, the pipeline bubble, the optimizer step,
overheads), so the difference between two plans' step times is the sum of the differences of
their components. The sentence names the component that helps #1 most and, when one exists,
the one that costs it most: "#1 is 12 % faster than #2: 0.41 s less pipeline bubble, 0.05 s
more TP communication". Plans that tie on speed are ranked by memory headroom
(:mod:`planner.search.ranking`), and the sentence says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["COMPONENT_WORDS", "WinnerExplanation", "explain_winner"]

COMPONENT_WORDS = {
    "compute_s": "compute",
    "recompute_s": "recompute",
    "tp_comm_s": "TP communication",
    "cp_comm_s": "CP communication",
    "ep_comm_s": "EP communication",
    "pp_comm_s": "PP communication",
    "dp_comm_s": "DP communication",
    "bubble_s": "pipeline bubble",
    "optimizer_s": "optimizer step",
    "offload_s": "offload traffic",
    "overhead_s": "launch overhead",
    "straggler_s": "slowest-GPU wait",
}
"""Each step-time component in words (``planner.performance.step_time`` breakdown keys)."""
TIE = 0.005
"""Speeds within 0.5 % are a tie: well inside the model's error (bench/results: ~5 % median)."""
GIB = 2.0**30


@dataclass(frozen=True, slots=True, kw_only=True)
class WinnerExplanation:
    """What separates plan #1 from plan #2."""

    faster_fraction: float
    """tokens/s per GPU of #1 over #2, minus 1 (0.12: #1 is 12 % faster)."""
    step_time_delta_s: float
    """Step time of #2 minus #1 (positive: #1's step is shorter)."""
    components: tuple[tuple[str, float], ...]
    """(breakdown key, seconds #1 saves on it; negative: seconds it spends more), largest
    saving first; only components that differ by at least 0.01 s."""
    headroom_delta_bytes: float | None
    """Memory headroom of #1 minus #2."""
    sentence: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "faster_fraction": self.faster_fraction,
            "step_time_delta_s": self.step_time_delta_s,
            "components": [
                {"component": key, "label": COMPONENT_WORDS.get(key, key), "saved_s": saved}
                for key, saved in self.components
            ],
            "headroom_delta_bytes": self.headroom_delta_bytes,
            "sentence": self.sentence,
        }


def _float(mapping: Mapping[str, Any], key: str) -> float | None:
    value = mapping.get(key)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _words(key: str, saved: float) -> str:
    return f"{abs(saved):.2f} s {'less' if saved > 0 else 'more'} {COMPONENT_WORDS.get(key, key)}"


def explain_winner(first: Mapping[str, Any], second: Mapping[str, Any]) -> WinnerExplanation | None:
    """Why plan ``first`` ranks above ``second`` (each a plan's JSON: ``performance`` and
    ``memory`` blocks); None when either lacks a speed."""
    perf1, perf2 = first.get("performance") or {}, second.get("performance") or {}
    speed1, speed2 = _float(perf1, "tokens_per_s_per_gpu"), _float(perf2, "tokens_per_s_per_gpu")
    step1, step2 = _float(perf1, "step_time_s"), _float(perf2, "step_time_s")
    if not speed1 or not speed2 or step1 is None or step2 is None:
        return None
    faster = speed1 / speed2 - 1.0
    parts1, parts2 = perf1.get("breakdown") or {}, perf2.get("breakdown") or {}
    saved = {
        key: (_float(parts2, key) or 0.0) - (_float(parts1, key) or 0.0)
        for key in dict.fromkeys([*parts1, *parts2])
    }
    components = tuple(
        sorted(((k, v) for k, v in saved.items() if abs(v) >= 0.005), key=lambda kv: -kv[1])
    )
    head1 = _float(first.get("memory") or {}, "headroom_bytes")
    head2 = _float(second.get("memory") or {}, "headroom_bytes")
    headroom = None if head1 is None or head2 is None else head1 - head2
    if abs(faster) < TIE:
        sentence = "#1 and #2 are equally fast (within 0.5 %)"
        if headroom is not None and headroom > 0:
            sentence += f"; #1 leaves {headroom / GIB:.1f} GiB more memory free"
    else:
        sentence = f"#1 is {100 * abs(faster):.0f} % {'faster' if faster > 0 else 'slower'} than #2"
        if faster < 0:  # ranked first on time or cost with fewer GPUs, or on headroom
            kind = (first.get("objective") or {}).get("kind", "throughput")
            sentence += f" per GPU but ranks first on {str(kind).replace('_', ' ')}"
        reasons = []
        if components and components[0][1] > 0:
            reasons.append(_words(*components[0]))
        if components and components[-1][1] < 0:
            reasons.append(_words(*components[-1]))
        if reasons:
            sentence += ": " + ", ".join(reasons)
    return WinnerExplanation(
        faster_fraction=faster,
        step_time_delta_s=step2 - step1,
        components=components,
        headroom_delta_bytes=headroom,
        sentence=sentence,
    )
