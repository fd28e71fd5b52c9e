"""Locked installs: uv.lock matches pyproject.toml, requirements.lock (pip's fallback) matches
uv.lock, and every install path installs from the lock. Read with tomllib: no uv needed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;\\]+)", flags=re.MULTILINE)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def lock() -> dict[str, Any]:
    return tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def project() -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data["project"]


def _root(lock: dict[str, Any]) -> dict[str, Any]:
    (root,) = [p for p in lock["package"] if p["name"] == "parallel-planner"]
    return root


def _wanted(requirements: list[str], extra: str | None) -> set[tuple[str, str, str | None]]:
    from packaging.requirements import Requirement

    out = set()
    for text in requirements:
        req = Requirement(text)
        marker = f"extra == '{extra}'" if extra else None
        out.add((_norm(req.name), str(req.specifier), marker))
    return out


def test_uv_lock_was_made_from_this_pyproject(
    lock: dict[str, Any], project: dict[str, Any]
) -> None:
    """The lock records the requirements it was resolved for: they must be today's, bounds and
    all (``uv lock --check`` says the same where uv and PyPI are at hand)."""
    from packaging.specifiers import SpecifierSet

    locked = {
        (_norm(r["name"]), str(SpecifierSet(r.get("specifier", ""))), r.get("marker"))
        for r in _root(lock)["metadata"]["requires-dist"]
    }
    wanted = _wanted(project["dependencies"], None) | _wanted(
        project["optional-dependencies"]["dev"], "dev"
    )
    assert locked == wanted, "run `uv lock` and commit uv.lock"


def test_requirements_lock_pins_exactly_what_uv_lock_pins(lock: dict[str, Any]) -> None:
    text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    exported = {(_norm(n.split("[")[0]), v) for n, v in PIN.findall(text)}
    locked = {
        (_norm(p["name"]), p["version"])
        for p in lock["package"]
        if "registry" in p.get("source", {})
    }
    assert exported == locked, (
        "requirements.lock is stale: uv export --frozen --extra dev --no-emit-project "
        "--no-header -o requirements.lock"
    )
    assert text.count("--hash=sha256:") >= len(locked)  # pip installs it with --require-hashes


def test_upper_bounds_only_where_a_break_is_known(project: dict[str, Any]) -> None:
    lines = (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    capped = [line for line in lines if re.search(r'^\s*"[^"]*<[^"]*",', line)]
    assert {re.split(r"[<>=]", line.strip().strip('",'))[0] for line in capped} <= {
        "hypothesis",
        "schemathesis",
    }
    assert all("#" in line for line in capped), "say why next to each upper bound"


def test_license_is_an_spdx_string(project: dict[str, Any]) -> None:
    assert project["license"] == "Apache-2.0"  # a table is deprecated by setuptools >= 77


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("scripts/setup", "sync --frozen --extra dev"),
        ("scripts/setup", "--require-hashes -r requirements.lock"),
        ("scripts/run", "bash scripts/setup --runtime"),
        ("scripts/test", "bash scripts/setup"),
        (".ci/run", "bash scripts/test"),
        ("docker/Dockerfile", "uv sync --frozen --no-dev"),
        ("docker/Dockerfile", "COPY pyproject.toml uv.lock"),
    ],
)
def test_every_install_path_uses_the_lock(path: str, needle: str) -> None:
    assert needle in (ROOT / path).read_text(encoding="utf-8")
