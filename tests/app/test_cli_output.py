"""What the CLI shows: readable --help, GiB everywhere, planned/infeasible/failed counts, tables
that keep their width when piped, and ranges that say what they expand to."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from app.cli import cli
from app.cli.ranges import RANGE_RULE, expansion

ROOT = Path(__file__).resolve().parents[2]
PYTHON_TYPES = re.compile(r"<(str|bool|int|float|path)>")


def run(*args: str, columns: str | None = "240") -> tuple[int, str, str]:
    """``columns=None``: as when piped, no terminal width known (rich falls back to 80)."""
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": columns, "LINES": None})
    return result.exit_code, result.stdout, result.stderr


def _commands() -> list[list[str]]:
    group = typer.main.get_command(cli)
    ctx = typer.Context(group)
    out: list[list[str]] = []
    for name in group.list_commands(ctx):  # type: ignore[attr-defined]
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        subs = getattr(command, "commands", None)
        out += [[name, sub] for sub in subs] if subs else [[name]]
    return out


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_help_shows_value_types_people_read(command: list[str]) -> None:
    code, out, _ = run(*command, "--help")
    assert code == 0
    assert not PYTHON_TYPES.search(out), PYTHON_TYPES.findall(out)


def test_plan_help_names_types_choices_and_required_options() -> None:
    _, out, _ = run("plan", "--help")
    for shown in ("INTEGER", "FLOAT", "[bf16|fp8|fp16]", "[none|selective|full],...",
                  "N|LIST|LOW-HIGH"):  # fmt: skip
        assert shown in out, shown
    model_line = next(line for line in out.splitlines() if "--model " in line)
    assert "(required)" in model_line
    assert RANGE_RULE.split(",")[0] in out
    _, out, _ = run("evaluate", "--help")
    assert "PATH" in out and "(required unless --input)" in out


@pytest.mark.parametrize("command", ["submit", "batch", "scale", "result"])
def test_api_key_help_names_the_header(command: str) -> None:
    _, out, _ = run(command, "--help")
    assert "X-API-Key" in out and "Bearer" not in out


def test_a_range_says_what_it_expands_to() -> None:
    assert expansion("num_gpus", "64-4096") == (
        "--num-gpus 64-4096 means 64, 128, 256, 512, 1024, 2048, 4096 (7 values)"
    )
    assert expansion("num_gpus", "96-400") == "--num-gpus 96-400 means 96, 192, 384, 400 (4 values)"
    assert expansion("num_gpus", "64") is None and expansion("num_gpus", "64,128") is None
    code, _, err = run("scale", "--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus",
                       "8-32", "--seq-length", "4096", "--global-batch-size", "64")  # fmt: skip
    assert code == 0 and "--num-gpus 8-32 means 8, 16, 32 (3 values)" in err


def test_piped_tables_keep_their_width() -> None:
    code, out, _ = run("scale", "--model", "llama3.1-70b", "--gpu", "h100-sxm-80gb",
                       "--num-gpus", "64-128", "--seq-length", "8192", "--global-batch-size",
                       "1024", "--token-budget", "15e12", "--usd-per-gpu-hour", "2.5",
                       columns=None)  # fmt: skip
    assert code == 0
    assert "…" not in out  # nothing cut: 9,198,734 stays whole
    assert max(len(line) for line in out.splitlines()) > 80
    assert re.search(r"\d,\d{3},\d{3}", out)


def test_batch_reports_gib_and_planned_infeasible_failed(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        (ROOT / "examples" / "jobs.csv").read_text() + "broken,no-such-model,h100-sxm-80gb,8,8,"
        "4096,64,bf16\n"
    )
    out = tmp_path / "out.csv"
    code, _, err = run("batch", str(jobs), "-o", str(out), "--workers", "1")
    assert code == 0
    assert "5 jobs: 3 planned, 1 infeasible (no layout fits), 1 failed" in err
    rows = list(csv.DictReader(out.open()))
    assert "memory_total_gib" in rows[0] and "memory_total_gb" not in rows[0]
    _, plan_out, _ = run("plan", "--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus",
                         "16", "--gpus-per-node", "8", "--seq-length", "8192",
                         "--global-batch-size", "128", "--json")  # fmt: skip
    best = json.loads(plan_out)["plans"][0]["memory"]["total_bytes"]
    first = next(r for r in rows if r["name"] == "llama8b-16" and r["rank"] == "1")
    assert float(first["memory_total_gib"]) == round(best / 2**30, 2)  # GiB, as plan shows


def test_plan_table_has_expert_columns_only_for_moe_models() -> None:
    job = ["--gpu", "h100-sxm-80gb", "--seq-length", "4096", "--global-batch-size", "256"]
    code, dense, _ = run("plan", "--model", "llama3.1-8b", "--num-gpus", "16", *job)
    assert code == 0
    header = next(line for line in dense.splitlines() if "tokens/s/GPU" in line)
    assert " etp " not in header and " ep " not in header and " dp " in header
    code, moe, _ = run("plan", "--model", "mixtral-8x7b", "--num-gpus", "64", *job)
    assert code == 0
    header = next(line for line in moe.splitlines() if "tokens/s/GPU" in line)
    assert " etp " in header and " ep " in header
