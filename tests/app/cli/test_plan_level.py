"""``planner plan`` and ``planner evaluate`` say when the profile they predict with carries a
cluster's calibrated level (``cluster_step_scale`` != 1: every step time scaled), as the
calibration's ``level`` block does in the API and the web page; a profile without one prints
nothing about it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from app.cli import cli
from models_db import load_gpu
from models_db.profiles import load_profile

runner = CliRunner()
PLAN = ["plan", "--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
        "--seq-length", "4096", "--global-batch-size", "32", "--top-k", "1"]  # fmt: skip


def _profile_file(tmp_path: Path, scale: float) -> Path:
    profile = replace(load_profile(load_gpu("h100-sxm-80gb")), cluster_step_scale=scale)
    path = tmp_path / f"profile-{scale}.json"
    path.write_text(json.dumps(profile.to_dict()), encoding="utf-8")
    return path


def test_a_calibrated_level_is_stated_under_the_table(tmp_path: Path) -> None:
    path = _profile_file(tmp_path, 1.25)
    result = runner.invoke(cli, [*PLAN, "--profile", str(path)])
    assert result.exit_code == 0, result.stderr
    lines = [x for x in result.stdout.splitlines() if x.startswith("Cluster level applied")]
    assert lines == [
        f"Cluster level applied (the profile {path}): every step time x1.250, tokens/s x0.800."
    ]


def test_no_level_line_without_a_level(tmp_path: Path) -> None:
    for args in (PLAN, [*PLAN, "--profile", str(_profile_file(tmp_path, 1.0))]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.stderr
        assert "Cluster level" not in result.stdout


def test_evaluate_states_the_level_too(tmp_path: Path) -> None:
    path = _profile_file(tmp_path, 0.8)
    args = ["evaluate", *PLAN[1:-2], "--tp", "2", "--profile", str(path)]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    assert "every step time x0.800, tokens/s x1.250." in result.stdout
    assert "Cluster level" not in runner.invoke(cli, args[:-2]).stdout
