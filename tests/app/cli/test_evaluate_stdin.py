"""``planner evaluate --input -`` reads the JSON lines from standard input (docs/file-formats.md;
untested before QA round 9): the same answers as the file, a bad line reported by its number."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from app.cli import cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "layouts.jsonl"


def _lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_stdin_gives_the_answers_of_the_file() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    piped = CliRunner().invoke(cli, ["evaluate", "--input", "-", "--json"], input=text)
    from_file = CliRunner().invoke(cli, ["evaluate", "--input", str(EXAMPLE), "--json"])
    assert piped.exit_code == from_file.exit_code == 0, piped.output
    answers = _lines(piped.stdout)
    assert answers == _lines(from_file.stdout)
    assert [a["line"] for a in answers] == list(range(1, len(text.strip().splitlines()) + 1))


def test_a_bad_line_on_stdin_is_named_and_the_rest_evaluated() -> None:
    good = EXAMPLE.read_text(encoding="utf-8").splitlines()[0]
    result = CliRunner().invoke(
        cli, ["evaluate", "--input", "-", "--json"], input=f"{good}\nnot json\n"
    )
    assert result.exit_code == 1
    first, second = _lines(result.stdout)
    assert first["line"] == 1 and first["valid"] is True
    assert second["line"] == 2 and "not valid JSON" in str(second["error"])
