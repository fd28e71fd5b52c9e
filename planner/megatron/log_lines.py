"""Reading an untrusted Megatron-LM log line by line within bounds (caps and a time budget).

Every pattern here runs on uploads, so each is linear in the line's length; see
:mod:`planner.megatron.log` for the formats (log sheet = the Megatron log-format reference).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from planner.megatron.log_records import LogParseError
from planner.megatron.parsing import parse_float

__all__ = ["MAX_LINES", "MAX_LINE_CHARS", "LogLines", "timer_line"]

MAX_LINE_CHARS = 16_384
"""Longer lines are skipped with a warning: no Megatron-LM line comes near this, and the cap
bounds the work any one line can cost."""
MAX_LINES = 500_000
"""More non-blank lines than this is not one training run's log (about 200 bytes a line)."""

_TIMER_VALUE = re.compile(r"\(?([0-9.]+)(?:, ([0-9.]+)\))?\s*")  # after "name ....: "
_BLANK_RUN = re.compile(r"\n[ \t\r\n]*\n")  # one backtrack per run: linear; keeps indentation


class LogLines:
    """``text.splitlines()`` read a chunk at a time, runs of blank lines collapsed into one.

    Iterating raises :class:`LogParseError` past :data:`MAX_LINES` lines or the time budget:
    the cheap checks that keep an 8 MB upload of newlines or of one-character lines from
    costing seconds. Lines over :data:`MAX_LINE_CHARS` are skipped and counted in ``too_long``.
    """

    def __init__(self, text: str, time_budget_s: float | None, chunk: int = 2**20) -> None:
        self._text = text
        self._time_budget_s = time_budget_s
        self._chunk = chunk
        self.too_long = 0

    def __iter__(self) -> Iterator[str]:
        budget = self._time_budget_s
        deadline = None if budget is None else time.monotonic() + budget
        chunks: list[str] = []
        start, text = 0, self._text
        while start < len(text):  # cut after a newline, so no line (nor a CR LF pair) is split
            end = text.find("\n", start + self._chunk)
            end = len(text) if end < 0 else end + 1
            chunks.append(_BLANK_RUN.sub("\n\n", text[start:end]))
            start = end
        if sum(c.count("\n") for c in chunks) > MAX_LINES:  # counted before any line is parsed
            raise LogParseError(
                f"the log has more than {MAX_LINES} lines; upload the part with the arguments "
                "block and the iteration lines you want measured"
            )
        for piece in chunks:
            for i, line in enumerate(piece.splitlines()):
                if deadline is not None and i % 1024 == 0 and time.monotonic() > deadline:
                    raise LogParseError(
                        f"the log took longer than {budget:g} s to read; upload a shorter "
                        "part (the arguments block and the iteration lines you want measured)"
                    )
                if len(line) > MAX_LINE_CHARS:
                    self.too_long += 1
                    continue
                yield line


def timer_line(line: str) -> tuple[str, float] | None:
    """``   name ......: (min, max)`` or ``   name ...: max`` -> (name, max) (log sheet §6).

    Split at the last ``": "`` in code rather than with a lazy regex, which backtracks
    quadratically on long runs of dots and digits."""
    head, sep, value = line.rpartition(": ")
    if not sep or not head[:1].isspace():
        return None
    dotted = head.rstrip(".")
    name = dotted.strip()
    match = _TIMER_VALUE.fullmatch(value)
    if not name or not dotted.endswith(" ") or match is None:
        return None
    number = parse_float(match.group(2) or match.group(1))
    return None if number is None else (name, number)
