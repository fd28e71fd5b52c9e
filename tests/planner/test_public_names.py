"""``planner``'s public names load on first use (PEP 562) and are the same objects as before."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import planner

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_resolves_to_its_module_object() -> None:
    for name in planner.__all__:
        value = getattr(planner, name)
        module = importlib.import_module(planner._MODULE_OF[name])
        assert value is getattr(module, name), name
    assert set(planner._MODULE_OF) == set(planner.__all__)
    assert set(planner.__all__) <= set(dir(planner))


def test_from_planner_import_works_as_before() -> None:
    from planner import ClusterSpec, SpecError, plan

    assert plan.__module__.startswith("planner.search")
    assert issubclass(SpecError, ValueError | Exception)
    assert ClusterSpec.__module__ == "planner.specs"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        planner.nope  # noqa: B018
    with pytest.raises(ImportError):
        exec("from planner import nope", {})


def test_importing_the_specs_loads_no_numpy_or_optuna() -> None:
    code = (
        "import sys, planner, planner.specs, planner.plain_numbers\n"
        "print(' '.join(m for m in ('numpy', 'scipy', 'optuna') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip() == ""
