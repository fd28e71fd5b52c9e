"""The host-cost assumptions (``host_costs.json``): the priors of every profile's ``host_*``
coefficients, stated once with their sources (mechanisms-facts §3)."""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["load_host_costs"]


def load_host_costs() -> dict[str, float]:
    """The four host costs in seconds (their sources stay in the file)."""
    text = resources.files("models_db").joinpath("host_costs.json").read_text(encoding="utf-8")
    return {k: float(v) for k, v in json.loads(text).items() if k != "sources"}
