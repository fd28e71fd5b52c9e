"""Count Python-level function calls, to check that code is vectorised without timing it.

The planner evaluates candidate layouts in numpy batches (house style: never one Python object
at a time in a hot loop). A wall-clock bound flakes on a shared machine and measures the machine;
the number of Python function calls does not: vectorised code makes the same calls for 1 000 rows
as for 100 000 (numpy's C loops are not Python calls), a per-row loop makes 100x more.
Speed itself is measured by the benchmarks under bench/ (bulk_eval, search_bench).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any


def python_calls(fn: Callable[[], Any]) -> int:
    """Python function calls (not C calls) made while running ``fn()``."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(previous)
    return count


def assert_calls_do_not_grow(small: Callable[[], Any], large: Callable[[], Any]) -> None:
    """``large`` (100x the rows of ``small``) makes about as many Python calls as ``small``."""
    small()  # warm-up: imports and caches are not the batch's cost
    few, many = python_calls(small), python_calls(large)
    assert many <= 1.05 * few + 50, f"Python calls grow with the rows: {few} -> {many}"
