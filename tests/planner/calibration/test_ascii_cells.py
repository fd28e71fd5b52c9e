"""A measurement cell is read only as plain ASCII decimal: Python's float()/int() would read
'1_0' as 10 and '٨' (an Arabic-Indic eight) as 8, and 'inf' as a speed. Such a row is skipped
with a reason naming the column and the accepted form, never measured with another number."""

from __future__ import annotations

import pytest

from planner.calibration.measurements import parse_rows
from planner.megatron.parsing import parse_int
from planner.plain_numbers import read_decimal, read_whole
from tests.planner.calibration.test_measurements import GPUS, rows

MISREAD = ["1_0", "٨", "inf", "-inf", "nan", "1e309", "0x10", "²", "１０"]


@pytest.mark.parametrize("text", MISREAD)
def test_the_parser_takes_ascii_decimal_only(text: str) -> None:
    assert read_decimal(text) is None and read_whole(text) is None


@pytest.mark.parametrize(
    ("text", "value"), [("10682.4", 10682.4), ("-1.5e3", -1500.0), (" 8 ", 8.0), (".5", 0.5)]
)
def test_plain_decimals_still_read(text: str, value: float) -> None:
    assert read_decimal(text) == value


@pytest.mark.parametrize("text", MISREAD)
@pytest.mark.parametrize("column", ["tp", "global_batch_size", "num_layers"])
def test_a_whole_number_column_names_the_column_and_the_form(column: str, text: str) -> None:
    ms, skipped = parse_rows([{**rows()[0], column: text}], GPUS.__getitem__)
    assert ms == []
    assert f"{column}={text!r} is not a whole number" in skipped[0].reason
    assert "ASCII digits 0-9" in skipped[0].reason


@pytest.mark.parametrize("text", MISREAD)
@pytest.mark.parametrize("column", ["tokens_per_sec_per_gpu", "step_time_s", "mfu_pct"])
def test_a_number_column_names_the_column_and_the_form(column: str, text: str) -> None:
    row = {**rows()[0], "tokens_per_sec_per_gpu": "", "step_time_s": "", "mfu_pct": ""}
    ms, skipped = parse_rows([{**row, column: text}], GPUS.__getitem__)
    assert ms == []
    reason = skipped[0].reason
    assert f"{column}={text!r} is not a" in reason and "ASCII digits" in reason
    finite = text.lstrip("+-") in ("inf", "nan", "1e309")
    assert ("finite" in reason) == finite


def test_a_whole_number_with_a_zero_fraction_still_reads() -> None:
    ms, skipped = parse_rows([{**rows()[0], "tp": "1.0", "seq_length": "8192"}], GPUS.__getitem__)
    assert skipped == [] and ms[0].layout.tp == 1


def test_a_megatron_log_integer_is_ascii_only() -> None:
    """Megatron prints Python ints in ASCII; a regex's \\d would also take '٨' as 8."""
    assert parse_int("٨") is None and parse_int("1_0") is None
    assert parse_int(" -12 ") == -12
