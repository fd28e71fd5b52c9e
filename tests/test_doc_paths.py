"""Every repository path and ``planner.*`` name the docs cite exists, so a reader never follows
a path into nothing (the README, ``docs/*.md`` and ``models_db/README.md``)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", ROOT / "models_db" / "README.md", *(ROOT / "docs").glob("*.md")])
TOP = ("planner", "app", "models_db", "bench", "docs", "examples", "tests", "scripts", "docker")
# a path in backticks, a markdown link or parentheses: `planner/memory/estimate.py`, (docs/x.md)
_TOPS = "|".join(TOP)
PATH = re.compile(rf"[`(](?:\.\./)?((?:{_TOPS})/[A-Za-z0-9_./*-]*)[`)]")
DOTTED = re.compile(r"`(planner(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")


def cited_paths(text: str) -> list[str]:
    return [m.rstrip("/.") for m in PATH.findall(text)]


def exists(path: str) -> bool:
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def resolves(dotted: str) -> bool:
    """``planner.a.b`` names a module, or an attribute of the longest importable prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_paths_and_names_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    missing = [p for p in cited_paths(text) if not exists(p)]
    missing += [d for d in DOTTED.findall(text) if not resolves(d)]
    assert not missing, f"{doc.name} cites what does not exist: {sorted(set(missing))}"


def test_the_check_sees_a_missing_path_and_name() -> None:
    text = "see `planner/nothing_here.py`, (docs/none.md) and `planner.search.no_such_name`"
    assert cited_paths(text) == ["planner/nothing_here.py", "docs/none.md"]
    assert not exists("planner/nothing_here.py")
    assert exists("planner/memory/*.py")
    assert not resolves("planner.search.no_such_name")
    assert resolves("planner.search.planning.plan")
