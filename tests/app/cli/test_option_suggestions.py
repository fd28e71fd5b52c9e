"""An unknown option gets the option a person meant, not click's letter-alike list."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.cli.suggest import closest


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["plan", "--seq", "5"], "No such option: --seq. Did you mean --seq-length?"),
        (["plan", "--gpu-typ", "x"], "No such option: --gpu-typ. Did you mean --gpu?"),
        (["plan", "--tp-size", "2"], "No such option: --tp-size. Did you mean --tp?"),
        (["plan", "--modle", "x"], "No such option: --modle. Did you mean --model?"),
        (["evaluate", "--micro-batch", "2"], "Did you mean --micro-batch-size?"),
        (["plan", "--tensor-model-parallel-size", "8"], "Did you mean --tp?"),
        (["calibrate", "--gpu", "x"], "No such option: --gpu. Did you mean --gpu-type?"),
        (["catalog", "list", "--jsn"], "No such option: --jsn. Did you mean --json?"),
    ],
)
def test_the_suggestion_is_the_option_meant(args: list[str], said: str) -> None:
    result = CliRunner().invoke(cli, args)
    text = " ".join(result.stderr.replace("│", " ").split())
    assert result.exit_code == 2
    assert said in text
    assert "Possible options" not in text


def test_nothing_close_suggests_nothing() -> None:
    result = CliRunner().invoke(cli, ["plan", "--zzzz", "1"])
    text = " ".join(result.stderr.replace("│", " ").split())
    assert result.exit_code == 2
    assert "No such option: --zzzz" in text and "Did you mean" not in text


def test_only_matches_near_the_best_are_kept() -> None:
    options = ["--model", "--profile", "--pp", "--tp", "--gpu", "--seed", "--seq-length"]
    assert closest("--modle", options) == ["--model"]
    assert closest("--seq", options) == ["--seq-length"]
    assert closest("--bf16", ["--precision", "--pp"]) == ["--precision"]
    assert closest("--bf16", ["--pp"]) == []  # a Megatron name whose option this command lacks
