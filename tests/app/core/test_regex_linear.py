"""Every regular expression that reads user input runs in linear time: each one searched over
20 000-character runs of the characters that make backtracking patterns blow up. A quadratic
pattern takes seconds here (a cubic one minutes); a linear one takes milliseconds, so the
bound below fails on a regression and not on a slow machine."""

from __future__ import annotations

import re
import time
from types import ModuleType

import pytest

import app.core.logging_config
import app.core.middleware
import app.keys.service
import planner.calibration.measurement_arch
import planner.megatron.args
import planner.megatron.flags
import planner.megatron.log
import planner.megatron.log_lines
import planner.megatron.log_rows
import planner.megatron.parsing

MODULES: tuple[ModuleType, ...] = (
    planner.megatron.log,
    planner.megatron.log_lines,
    planner.megatron.log_rows,
    planner.megatron.parsing,
    planner.calibration.measurement_arch,
    planner.megatron.args,
    planner.megatron.flags,
    app.core.logging_config,
    app.keys.service,
    app.core.middleware,
)
N = 20_000
PIECES = (" ", "-", ".", "0", "a", "\t", "[", "(", ":", "=", "~", "0.", " .", ": ", "- ", "1,")
PREFIXES = ("", "  a ", "vocab", "password", "pp_0123456789ab_", "[Rank 1] (", "iteration 1/")


def patterns() -> list[tuple[str, re.Pattern[str]]]:
    found = []
    for module in MODULES:
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found.append((f"{module.__name__}.{name}", value))
            elif isinstance(value, tuple) and all(isinstance(v, re.Pattern) for v in value):
                found += [(f"{module.__name__}.{name}[{i}]", v) for i, v in enumerate(value)]
    return found


@pytest.mark.parametrize(("name", "pattern"), patterns(), ids=[n for n, _ in patterns()])
def test_pattern_is_linear_on_long_runs(name: str, pattern: re.Pattern[str]) -> None:
    worst = 0.0
    for prefix in PREFIXES:
        for piece in PIECES:
            text = prefix + piece * (N // len(piece)) + "\x01"
            start = time.perf_counter()
            pattern.search(text)
            worst = max(worst, time.perf_counter() - start)
    assert worst < 0.5, f"{name} took {worst:.2f} s on a 20 000-character run"


def test_mask_secrets_is_linear() -> None:
    start = time.perf_counter()
    for piece in PIECES:
        app.core.logging_config.mask_secrets("password" + piece * N)
    assert time.perf_counter() - start < 2.0
