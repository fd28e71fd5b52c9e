"""The Megatron-log parser on hostile input: linear patterns, line and size caps, a time budget.

The bounds below are generous (seconds, on a shared 2-core machine) and far below what the old
quadratic patterns took (240 KB of dashes stalled a server for 51 s): they fail on a regression
to backtracking, not on noise.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from planner.megatron.log import (
    MAX_LINE_CHARS,
    MAX_LINES,
    LogParseError,
    parse_megatron_log,
)

LOGS = Path(__file__).parents[1] / "data" / "megatron_logs"
MAIN = (LOGS / "core_0_19_llama8b.log").read_text()

PATHOLOGICAL = {
    "dashes": "-" * 4_000_000,
    "dash lines": ("-" * 16_000 + " arguments\n") * 200,
    "argument-like lines": ("  lr " + "." * 8000 + " " * 8000 + "x\n") * 200,
    "timer-like lines": ("    name " + "0." * 8000 + ": 1\n") * 200,
    "memory-like lines": ("[Rank 1] (" * 1600 + "\n") * 200,
    "newlines": "\n" * 8_000_000,
    "crlf": "\r\n" * 4_000_000,
    "nul": "\x00" * 8_000_000,
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_text_is_refused_quickly(name: str) -> None:
    start = time.perf_counter()
    with pytest.raises(LogParseError, match="not a Megatron-LM log"):
        parse_megatron_log(PATHOLOGICAL[name])
    assert time.perf_counter() - start < 5.0


def test_more_lines_than_the_cap_are_refused_before_parsing() -> None:
    with pytest.raises(LogParseError, match=f"more than {MAX_LINES} lines"):
        parse_megatron_log("x\n" * (MAX_LINES + 1))


def test_time_budget_stops_a_slow_parse() -> None:
    with pytest.raises(LogParseError, match="longer than 0 s"):
        parse_megatron_log(MAIN * 20, time_budget_s=0.0)


def test_a_line_over_the_cap_is_skipped_with_a_warning() -> None:
    result = parse_megatron_log(MAIN + "x" * (MAX_LINE_CHARS + 1) + "\n")
    assert any(f"over {MAX_LINE_CHARS} characters" in w for w in result.warnings)
    assert result.to_measurement_rows()[0]["tp"]


def test_a_run_of_blank_lines_reads_as_one_blank_line() -> None:
    one = parse_megatron_log(MAIN.replace("\n", "\n\n"))
    many = parse_megatron_log(MAIN.replace("\n", "\n\n \r\n\t\n\n"))
    assert many.to_measurement_rows() == one.to_measurement_rows()
    assert many.timers_ms == one.timers_ms
    assert many.arguments == parse_megatron_log(MAIN).arguments


def test_argument_values_are_right_stripped() -> None:
    header = "-" * 20 + " arguments " + "-" * 20
    footer = "-" * 20 + " end of arguments " + "-" * 20
    text = f"{header}\n  lr ........ 0.0001   \n  seed .... 1234\n{footer}\n"
    assert parse_megatron_log(text).arguments == {"lr": "0.0001", "seed": "1234"}


def test_timer_lines_with_min_max_and_with_max_only() -> None:
    text = (
        MAIN
        + "(min, max) time across ranks (ms):\n"
        + "    forward-backward ...............: (1200.50, 1234.75)\n"
        + "    optimizer ......................: 55.25\n"
        + "    broken .........................: 1.2.3\n"
    )
    last = max(parse_megatron_log(text).timers_ms.items())[1]
    assert last["forward-backward"] == 1234.75
    assert last["optimizer"] == 55.25
    assert "broken" not in last
