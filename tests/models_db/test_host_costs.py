"""The host-cost assumption is stated once, in models_db/host_costs.json, with its source."""

from __future__ import annotations

import json
from importlib import resources

from models_db.host_costs import load_host_costs
from planner.performance.profile import PerformanceProfile

HOST_FIELDS = ("host_kernel_s", "host_graph_launch_s", "host_sync_s", "host_micro_batch_s")


def test_the_loader_returns_the_four_costs() -> None:
    assert set(load_host_costs()) == set(HOST_FIELDS)


def _data() -> dict[str, object]:
    text = resources.files("models_db").joinpath("host_costs.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def test_planner_defaults_are_the_stated_assumptions() -> None:
    data, prof = _data(), PerformanceProfile(gpu="x")
    assert {name: getattr(prof, name) for name in HOST_FIELDS} == {n: data[n] for n in HOST_FIELDS}


def test_every_host_cost_says_where_it_comes_from() -> None:
    sources = _data()["sources"]
    assert isinstance(sources, dict)
    assert all(sources.get(name) for name in HOST_FIELDS)
