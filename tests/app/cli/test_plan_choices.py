"""``planner plan`` states the stack settings it chose where the request left them open
(docs/stack-settings.md: "printed by `planner plan` as 'The planner chose: ...'")."""

from __future__ import annotations

from typer.testing import CliRunner

from app.cli import cli

runner = CliRunner()
LONG = ["plan", "--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "16",
        "--seq-length", "65536", "--global-batch-size", "16", "--top-k", "1"]  # fmt: skip


def test_plan_table_is_followed_by_the_planners_choices() -> None:
    result = runner.invoke(cli, LONG)
    assert result.exit_code == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("The planner chose:")]
    assert "cp_comm_type" in line and "cuda_graphs" in line


def test_fixed_settings_are_not_reported_as_chosen() -> None:
    result = runner.invoke(cli, [*LONG, "--cp-comm-type", "p2p", "--cuda-graphs", "none"])
    assert result.exit_code == 0, result.stderr
    assert "The planner chose:" not in result.stdout
