"""Reading the values Megatron-LM prints: integers, booleans, floats, ``name: value`` pieces.

Shared by the log parser (:mod:`planner.megatron.log`) and the row builder
(:mod:`planner.megatron.log_rows`); nothing here guesses: text that is not a value gives None.
"""

from __future__ import annotations

import re


def parse_int(value: str | None) -> int | None:
    """An integer as Megatron prints it, or None (absent, 'None' or not a number)."""
    if value is None or not re.fullmatch(r"-?[0-9]+", value.strip()):  # \d takes "٨"
        return None
    return int(value)


def parse_bool(value: str | None) -> bool | None:
    """Python's printed True/False, or None for anything else."""
    return {"True": True, "False": False}.get((value or "").strip())


def parse_float(value: str) -> float | None:
    """A float, or None where the text is not one."""
    try:
        return float(value)
    except ValueError:
        return None


def split_pieces(text: str, sep: str) -> dict[str, str]:
    """``a: 1 | b c: 2`` -> {"a": "1", "b c": "2"}, splitting each piece at its last ``sep``."""
    out: dict[str, str] = {}
    for piece in text.split("|"):
        name, found, value = piece.strip().rpartition(sep)
        if found:
            out[name.strip()] = value.strip()
    return out
