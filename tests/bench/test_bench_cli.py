"""Every runnable bench answers ``--help`` (exit 0, nothing written) and refuses an unknown
argument (argparse's exit 2).

``python -m bench.X --help`` runs in a subprocess per module, in parallel, in one module-scoped
fixture (each pays the planner's import, seconds on two shared cores); the unknown argument is
tried on every module in ONE further subprocess that runs each as ``__main__`` (``runpy``, what
``-m`` does) so the imports are paid once. The parametrised tests read the outcomes. The files a
bench writes (``bench/results``, ``models_db``, README.md) are compared by mtime before and after.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.cli import bench_parser, first_paragraph

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
MAIN = re.compile(r'^if __name__ == "__main__":$', flags=re.MULTILINE)
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if MAIN.search(p.read_text(encoding="utf-8")))
WATCHED = (ROOT / "bench" / "results", ROOT / "models_db", ROOT / "README.md")
UNKNOWN = "--no-such-flag"
TIMEOUT_S = 150  # a bench that ignores its arguments runs for minutes
# Runs each module as __main__ with UNKNOWN; prints {module: [exit code, stderr]} as JSON.
UNKNOWN_DRIVER = f"""
import contextlib, io, json, runpy, sys, warnings
warnings.simplefilter("ignore", RuntimeWarning)  # runpy: module already imported by another
out = {{}}
for m in sys.argv[1:]:
    sys.argv = [m, {UNKNOWN!r}]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_module("bench." + m, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    out[m] = [code, err.getvalue()]
print(json.dumps(out))
"""

pytestmark = pytest.mark.slow

Run = tuple[int, str, str]


def _mtimes() -> dict[str, int]:
    files = [p for w in WATCHED for p in ([w] if w.is_file() else w.rglob("*")) if p.is_file()]
    return {str(p.relative_to(ROOT)): p.stat().st_mtime_ns for p in files}


def _run(argv: list[str]) -> Run:
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1, "", f"still running after {TIMEOUT_S} s (it ignored its arguments?): {argv}"
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def runs() -> tuple[dict[tuple[str, str], Run], list[str]]:
    before = _mtimes()
    jobs = [[sys.executable, "-m", f"bench.{m}", "--help"] for m in MODULES]
    jobs.append([sys.executable, "-c", UNKNOWN_DRIVER, *MODULES])
    with ThreadPoolExecutor(max_workers=min(8, 2 * (os.cpu_count() or 1))) as pool:
        done = list(pool.map(_run, jobs))
    after = _mtimes()
    results = {(m, "--help"): r for m, r in zip(MODULES, done, strict=False)}
    rc, out, err = done[-1]
    unknown = json.loads(out) if rc == 0 else {m: [rc, err] for m in MODULES}
    results |= {(m, UNKNOWN): (code, "", text) for m, (code, text) in unknown.items()}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return results, changed


def test_the_benches_with_a_main_block_are_found() -> None:
    assert {"search_bench", "calibration", "fidelity", "mechanisms"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_help_says_what_the_bench_does_and_runs_nothing(
    module: str, runs: tuple[dict[tuple[str, str], Run], list[str]]
) -> None:
    results, changed = runs
    rc, out, err = results[(module, "--help")]
    assert rc == 0, err
    assert "usage:" in out
    assert f"bench.{module}" in out or f"{module}.py" in out
    source = (BENCH / f"{module}.py").read_text(encoding="utf-8")
    if "bench_parser(" in source:
        assert "writes: " in out and "runs: " in out
        summary = first_paragraph(ast.get_docstring(ast.parse(source)))
        assert summary in " ".join(out.split())
    assert not changed, f"files changed while the benches printed --help: {changed}"


@pytest.mark.parametrize("module", MODULES)
def test_an_unknown_argument_exits_2_with_argparse_message(
    module: str, runs: tuple[dict[tuple[str, str], Run], list[str]]
) -> None:
    rc, _, err = runs[0][(module, UNKNOWN)]
    assert rc == 2, err
    assert "usage:" in err and f"unrecognized arguments: {UNKNOWN}" in err


def test_the_description_is_the_docstring_summary_and_the_epilog_names_the_outputs() -> None:
    doc = """First line of the summary
    continues here.

    The method, which --help leaves to pydoc.
    """
    text = bench_parser(
        "bench.x", doc, writes="bench/results/x.md", runtime="a second"
    ).format_help()
    assert "First line of the summary continues here." in text
    assert "The method" not in text
    assert "writes: bench/results/x.md" in text and "runs: a second" in text


def test_a_bench_must_say_what_it_writes_and_how_long_it_runs() -> None:
    with pytest.raises(ValueError, match=r"bench\.x: say what the bench writes"):
        bench_parser("bench.x", "Doc.", writes="", runtime="a second")
