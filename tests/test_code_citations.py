"""Every ``planner.*`` name and repository path that planner/'s docstrings and comments cite
exists (the modules moved; a citation of the old place sends a reader into nothing)."""

from __future__ import annotations

import re

from tests.test_doc_paths import ROOT, cited_paths, exists, resolves

# a dotted name anywhere in the source (comments and docstrings cite them without backticks)
DOTTED = re.compile(r"(?<![\w.])(planner(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
# a test file named in prose: tests/planner/memory/test_offload.py
TEST_FILE = re.compile(r"(?<![\w/])(tests/[\w/]+\.py)")


def broken_citations(text: str) -> list[str]:
    missing = [d for d in DOTTED.findall(text) if not resolves(d)]
    missing += [p for p in [*cited_paths(text), *TEST_FILE.findall(text)] if not exists(p)]
    return sorted(set(missing))


def test_planner_cites_only_what_exists() -> None:
    found = {
        str(path.relative_to(ROOT)): broken
        for path in sorted((ROOT / "planner").rglob("*.py"))
        if (broken := broken_citations(path.read_text(encoding="utf-8")))
    }
    assert not found, f"stale citations: {found}"


def test_the_check_sees_a_moved_module_and_a_missing_test() -> None:
    text = "(planner.perf_compute.gemm_efficiency form); tests/planner/performance/test_x.py"
    assert broken_citations(text) == [
        "planner.perf_compute.gemm_efficiency",
        "tests/planner/performance/test_x.py",
    ]
    assert broken_citations("planner.performance.compute.gemm_efficiency.") == []
