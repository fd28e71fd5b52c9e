"""Collective bandwidth-versus-size curves, one JSON file per GPU type.

``models_db/collectives/<gpu-slug>.json`` holds the saturating curves
(beta_max, S_half per operation and group size inside one node) and the network priors across
nodes that :class:`planner.performance.collective_bandwidth.CollectiveTable` describes; every
number carries its source (mechanisms-facts §2.2-2.4). A GPU without a file has no table
(``None``): the throughput model keeps its constant link efficiencies there.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from planner.performance.collective_bandwidth import (
    CollectiveCurve,
    CollectiveTable,
    NetworkPriors,
)
from planner.specs import SpecError

__all__ = ["available_collective_tables", "load_collective_table", "table_from_dict"]


def _folder() -> Traversable:
    return resources.files("models_db").joinpath("collectives")


def available_collective_tables() -> list[str]:
    """GPU slugs that have a collective table."""
    return sorted(
        p.name.removesuffix(".json") for p in _folder().iterdir() if p.name.endswith(".json")
    )


def table_from_dict(data: dict[str, Any]) -> CollectiveTable:
    """Build the planner's table from the JSON layout of ``models_db/collectives``."""
    try:
        network = dict(data["network"])
        sources = network.pop("sources", {})
        curves = tuple(
            CollectiveCurve(link=data.get("link", "switch"), **curve) for curve in data["curves"]
        )
        return CollectiveTable(
            gpu=data["gpu"],
            link=data.get("link", "switch"),
            curves=curves,
            network=NetworkPriors(**network, sources=tuple(sorted(sources.values()))),
            mesh_link_bytes_per_s=data.get("mesh_link_bytes_per_s"),
        )
    except (KeyError, TypeError) as exc:
        raise SpecError(f"malformed collective table: {exc}", field="curves") from exc


def load_collective_table(gpu_slug: str) -> CollectiveTable | None:
    """The collective table of a GPU type, or None when the catalog has none."""
    path = _folder().joinpath(f"{gpu_slug}.json")
    if not path.is_file():
        return None
    return table_from_dict(json.loads(path.read_text(encoding="utf-8")))
