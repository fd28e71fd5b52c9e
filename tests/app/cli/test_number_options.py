"""Number options take plain ASCII decimal only: '1_6' is not 16, 'inf' is not a threshold
(app/cli/number_types.py; the web forms, measurement files and API bodies read numbers alike)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from app.cli import cli

JOB = ["--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
       "--global-batch-size", "64"]  # fmt: skip


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("flag", "text"),
    [
        ("--seq-length", "1_6"),
        ("--seq-length", "\u0663"),  # an Arabic-Indic three
        ("--seq-length", "0x10"),
        ("--memory-threshold", "inf"),
        ("--memory-threshold", "1_0e-1"),
    ],
)
def test_a_number_option_refuses_text_that_is_not_plain_ascii(flag: str, text: str) -> None:
    args = [*JOB, "--seq-length", "4096"] if flag != "--seq-length" else JOB
    code, out = _run("evaluate", *args, flag, text, "--tp", "1")
    assert code == 2, out
    assert "is not a number" in out and flag in out, out


def test_plain_numbers_still_read() -> None:
    code, out = _run("evaluate", *JOB, "--seq-length", "4096", "--memory-threshold", "0.8",
                     "--tp", "1")  # fmt: skip
    assert code in (0, 3), out  # evaluated (fits or not); never a usage error
    assert "is not a number" not in out
