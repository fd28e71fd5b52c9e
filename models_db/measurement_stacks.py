"""The software stack of each published measurement, as far as its source says (issue 12 item 1).

``shared/data/measured-throughput.csv`` is read-only and has no stack columns; this module fills
them from ``measurement_stacks.csv`` (one line per source, or per sweep, and field) before the
rows are parsed (:func:`planner.calibration.measurements.parse_rows` reads a column named as each
field). ``basis`` says how each value is known: ``stated`` (the source says so), ``era_default``
(the source says nothing and the value is what Megatron did at the time, with the version facts
of mechanisms-facts §8), ``inferred`` (not stated; NVIDIA's recipes of that release). The
``evidence`` column keeps the source's words or the reason. A column the row already has wins.
``fp8_recipe`` fills fp8 rows only (a bf16 job has no recipe: TrainingJob refuses one).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["StackNote", "annotate_rows", "stack_notes"]

PATH = Path(__file__).with_name("measurement_stacks.csv")
BASES = frozenset({"stated", "era_default", "inferred"})
FP8_ONLY = frozenset({"fp8_recipe"})
"""Fields that describe fp8 training: filled on rows whose precision is fp8 only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StackNote:
    source_id: str
    sweep_id: str
    """A sweep of the source, or '*' for all its rows."""
    field: str
    value: str
    basis: str
    evidence: str


@lru_cache(maxsize=1)
def stack_notes() -> tuple[StackNote, ...]:
    """Every annotation line; a bad basis is an error naming the line."""
    with open(PATH, newline="", encoding="utf-8") as fh:
        notes = tuple(StackNote(**row) for row in csv.DictReader(fh))
    for i, note in enumerate(notes, start=2):
        if note.basis not in BASES:
            raise ValueError(f"{PATH.name} line {i}: basis {note.basis!r} is not one of {BASES}")
    return notes


def annotate_rows(rows: Iterable[Mapping[str, str]]) -> list[dict[str, str]]:
    """Copies of ``rows`` with the stack columns filled (sweep lines before source lines)."""
    by_key: dict[tuple[str, str], dict[str, str]] = {}
    for note in stack_notes():
        by_key.setdefault((note.source_id, note.sweep_id), {})[note.field] = note.value
    out = []
    for row in rows:
        filled = dict(row)
        source, sweep = row.get("source_id", ""), row.get("sweep_id", "")
        fp8 = (row.get("precision") or "").strip().lower().startswith("fp8")
        for key in ((source, sweep), (source, "*")):
            for name, value in by_key.get(key, {}).items():
                if name in FP8_ONLY and not fp8:
                    continue
                if not (filled.get(name) or "").strip():
                    filled[name] = value
        out.append(filled)
    return out
