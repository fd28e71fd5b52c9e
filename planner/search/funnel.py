"""The search funnel: one vocabulary for how many layouts each step of a search kept.

Every interface (the API's plan result, the CLI summary, the web page) shows the same five
counts in the same order, so no page says "544 evaluated, 544 feasible" beside a table of
8 744 rejections without saying where those came from:

    enumerated -> passed Megatron's rules -> fit in memory -> evaluated -> ranked

Each count is at most the one before it. The layouts lost between "enumerated" and "passed
Megatron's rules" are the rule rows of the rejection histogram; those lost between "passed" and
"fit in memory" are its memory row; "evaluated" is below "fit in memory" only for a sampled
(TPE) search, which estimates the speed of part of the feasible set.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FUNNEL_STEPS", "Funnel"]

FUNNEL_STEPS: tuple[tuple[str, str], ...] = (
    ("enumerated", "enumerated"),
    ("valid", "passed Megatron's rules"),
    ("feasible", "fit in memory"),
    ("evaluated", "evaluated"),
    ("ranked", "ranked"),
)
"""(key, words) of each step, in order; the keys are SearchStats' field names."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Funnel:
    """How many layouts each step of one search (or of its merged parts) kept."""

    enumerated: int
    """Layouts the space holds for the model, cluster(s) and job(s)."""
    valid: int
    """Of those, the layouts that pass every Megatron-LM start-up rule."""
    feasible: int
    """Of those, the layouts that fit under the memory threshold."""
    evaluated: int
    """Of those, the layouts whose speed was estimated (all of them when exhaustive)."""
    ranked: int
    """Of those, the layouts returned as plans (top_k at most)."""
    choices: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Stack settings the search chose where the request left them open: setting -> value ->
    layouts (``cp_comm_type`` of the feasible cp > 1 layouts, ``cuda_graphs`` of the best
    candidates; planner.search.stack_choice)."""

    def __post_init__(self) -> None:
        counts = [getattr(self, key) for key, _ in FUNNEL_STEPS]
        if any(c < 0 for c in counts) or any(b > a for a, b in itertools.pairwise(counts)):
            raise ValueError(f"funnel counts must be >= 0 and shrink step by step: {counts}")

    @classmethod
    def of(
        cls,
        counts: Mapping[str, Any],
        ranked: int,
        choices: Mapping[str, Mapping[str, int]] | None = None,
    ) -> Funnel:
        """From a search summary (``SearchStats.to_dict()`` or a merged one) and the plans."""

        def count(key: str) -> int:
            value = counts.get(key)
            return int(value) if isinstance(value, int | float) else 0

        return cls(
            enumerated=count("enumerated"),
            valid=count("valid"),
            feasible=count("feasible"),
            evaluated=count("evaluated"),
            ranked=ranked,
            choices=dict(choices or {}),
        )

    def steps(self) -> list[dict[str, Any]]:
        """Each step as ``{key, label, count}``, in order."""
        return [
            {"key": key, "label": words, "count": getattr(self, key)} for key, words in FUNNEL_STEPS
        ]

    def sentence(self) -> str:
        """The funnel in words: '8 744 enumerated -> 1 120 passed Megatron's rules -> ...'."""
        return " -> ".join(f"{s['count']:,} {s['label']}" for s in self.steps())

    def choices_sentence(self) -> str:
        """What the search chose, in words: 'cp_comm_type p2p 120, a2a 30; cuda_graphs none
        64' ('' when the request fixed every stack setting)."""
        return "; ".join(
            f"{name} " + ", ".join(f"{value} {n:,}" for value, n in values.items())
            for name, values in self.choices.items()
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **{key: getattr(self, key) for key, _ in FUNNEL_STEPS},
            "steps": self.steps(),
            "sentence": self.sentence(),
            **(
                {
                    "choices": {k: dict(v) for k, v in self.choices.items()},
                    "choices_sentence": self.choices_sentence(),
                }
                if self.choices
                else {}
            ),
        }
