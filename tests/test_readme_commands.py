"""Every ``planner`` command in the README's code blocks runs as written from the repository root.

Commands with ``--server`` go to a real ``planner serve`` started on 127.0.0.1 with a free port
(the README's ``http://127.0.0.1:8000`` is replaced by it); ``<id>`` is the id that the README's
``planner keys create`` printed. Each runs in a subprocess (``python -m app.cli``, as the
``planner`` script does) on a throw-away database; files it writes in the root are removed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_URL = "http://127.0.0.1:8000"
# every fenced block with its language (pairing the fences of python blocks too), shell ones kept
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.MULTILINE | re.DOTALL)
SHELL = ("", "bash", "sh", "console")

pytestmark = pytest.mark.slow


def readme_commands(text: str) -> list[list[str]]:
    """The ``planner ...`` commands of the README's code blocks, as argv lists."""
    commands: list[list[str]] = []
    for language, block in FENCE.findall(text):
        if language not in SHELL:
            continue
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split(";"):
                argv = shlex.split(part, comments=True)
                if argv and argv[0] == "planner":
                    commands.append(argv)
    return commands


COMMANDS = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
STATE: dict[str, str] = {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    data = tmp_path_factory.mktemp("readme-data")
    return {
        **os.environ,
        "PLANNER_DATA_DIR": str(data),
        "PLANNER_DATABASE_URL": f"sqlite:///{data}/planner.db",
        "COLUMNS": "200",
    }


@pytest.fixture(scope="module")
def server(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``planner serve`` on a free port of 127.0.0.1, with its own database."""
    data = tmp_path_factory.mktemp("readme-server")
    port = _free_port()
    server_env = {
        **env,
        "PLANNER_DATA_DIR": str(data),
        "PLANNER_DATABASE_URL": f"sqlite:///{data}/planner.db",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=server_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, "planner serve exited"
            assert time.monotonic() < deadline, "planner serve did not answer /healthz in 90 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def clean_root() -> Iterator[None]:
    """Remove what a command wrote into the repository root (plans.csv, my-profile.json)."""
    before = set(ROOT.iterdir())
    yield
    for path in set(ROOT.iterdir()) - before:
        if path.is_file():
            path.unlink()


def test_the_readme_has_the_commands_it_should() -> None:
    names = {" ".join(argv[1:3]) for argv in COMMANDS}
    assert len(COMMANDS) >= 12, COMMANDS
    for expected in ("evaluate --input", "batch examples/jobs.csv", "calibrate --measurements"):
        assert expected in names, names
    assert any("submit" in argv and "--server" in argv for argv in COMMANDS)


def test_every_example_file_the_readme_names_exists() -> None:
    named = {a for argv in COMMANDS for a in argv if a.startswith("examples/")}
    assert named >= {"examples/layouts.jsonl", "examples/jobs.csv", "examples/measurements.csv"}
    for path in named:
        assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[1:4]) for a in COMMANDS])
def test_readme_command_runs_as_written(
    argv: list[str], env: dict[str, str], request: pytest.FixtureRequest, clean_root: None
) -> None:
    args = list(argv[1:])
    if "--server" in args:
        url = request.getfixturevalue("server")
        args = [url if a == README_URL else a for a in args]
    if "<id>" in args:
        if "key_id" not in STATE:
            pytest.skip("needs the id printed by `planner keys create` (run the whole module)")
        args = [STATE["key_id"] if a == "<id>" else a for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    shown = f"$ {shlex.join(argv)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert done.returncode == 0, shown
    assert "Traceback" not in done.stderr, shown
    if args[:2] == ["keys", "create"] and "--json" in args:
        STATE["key_id"] = json.loads(done.stdout)["id"]


SCRIPTS = [
    block
    for language, block in FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    if language == "python"
]


def _run_script(code: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stdout


def test_the_readme_library_batch_script_plans_each_job_and_reports_the_bad_one(
    env: dict[str, str],
) -> None:
    [script] = [s for s in SCRIPTS if "from planner import" in s]
    lines = _run_script(script, env).splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("llama3.1-8b 16 {") and lines[1].startswith("llama3.1-70b 64 {")
    assert lines[2].startswith("llama3.1-8b 16 error:") and "global_batch_size" in lines[2]


def test_the_readme_sdk_batch_script_gets_a_row_per_job_and_rank(
    env: dict[str, str], server: str
) -> None:
    [script] = [s for s in SCRIPTS if "PlannerClient" in s]
    assert README_URL in script
    lines = _run_script(script.replace(README_URL, server), env).splitlines()
    assert {line.split()[0] for line in lines} == {"llama8b-8", "llama8b-16", "llama8b-32"}
    assert any(line.split()[1] == "1" for line in lines)
