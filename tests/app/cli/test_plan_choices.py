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


def test_auto_cuda_graphs_is_the_planners_choice_as_in_the_web_form() -> None:
    result = runner.invoke(cli, [*LONG, "--cuda-graphs", "auto"])
    assert result.exit_code == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("The planner chose:")]
    assert "cuda_graphs" in line


def test_auto_cuda_graphs_is_refused_where_a_layout_is_evaluated() -> None:
    args = ["evaluate", "--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
            "--tp", "2", "--cuda-graphs", "auto"]  # fmt: skip
    result = runner.invoke(cli, args)
    assert result.exit_code != 0
    assert "cuda_graphs" in result.output or "cuda-graphs" in result.output
