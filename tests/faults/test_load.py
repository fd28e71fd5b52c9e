"""CI variant of bench/load_mixed.py: 10 s of mixed wrk load with API keys, zero errors."""

from __future__ import annotations

import shutil

import pytest

from bench.load_mixed import run_load

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (apt-get install wrk)"),
]


def test_mixed_load_for_10_s_has_zero_errors() -> None:
    result = run_load(duration_s=10, connections=16, threads=2)
    assert result["requests"] > 100
    assert result["errors"] == 0, result["statuses"]
    assert set(result["statuses"]) <= {"200", "201", "202"}
