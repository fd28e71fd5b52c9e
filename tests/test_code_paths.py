"""Every repository path a module's docstrings and comments cite exists (QA round 9 found
``app/auth/deps.py`` and ``app/plan_request.py`` cited after those files moved). The docs'
twin is tests/test_doc_paths.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "planner", "models_db")
# a file path under a top-level folder of the repository, as prose writes it
PATH = re.compile(
    r"(?<![\w./-])((?:app|planner|models_db|bench|docs|examples|tests|scripts|docker)"
    r"/[A-Za-z0-9_/*.-]+\.(?:py|md|json|csv|yaml|yml|html|js|css))"
)


def cited_paths(text: str) -> list[str]:
    return PATH.findall(text)


def exists(path: str) -> bool:
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


@pytest.mark.parametrize("package", PACKAGES)
def test_paths_cited_in_code_exist(package: str) -> None:
    missing = [
        f"{module.relative_to(ROOT)}: {path}"
        for module in sorted((ROOT / package).rglob("*.py"))
        for path in cited_paths(module.read_text(encoding="utf-8"))
        if not exists(path)
    ]
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


def test_the_check_sees_a_moved_path() -> None:
    text = "as with API keys: app/auth/deps.py); see ../shared/data/x.csv and planner/specs.py"
    assert cited_paths(text) == ["app/auth/deps.py", "planner/specs.py"]
    assert not exists("app/auth/deps.py") and exists("planner/specs.py")
