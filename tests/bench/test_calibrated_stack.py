"""The shipped interval table's calibrated stack is the one its rows ran (issue 12 item 9): a
stack setting added to ``planner.calibration.intervals.STACK_CHECKED`` without rebuilding the
table would never be flagged (the fp8 recipe was, brief review9)."""

from __future__ import annotations

import json

from bench.calibration import TABLE, _stack_range, load, usable


def test_the_shipped_tables_stack_is_that_of_its_rows() -> None:
    shipped = json.loads(TABLE.read_text(encoding="utf-8"))["calibrated"]["stack"]
    assert shipped == _stack_range(usable(load()[0]))
