"""Why one pooled between-campaign spread: the candidate rules measured out of sample.

Run ``python -m bench.published_bands_alternatives`` after ``bench.published_check`` and
``bench.calibration``. For each candidate grouping of the campaigns, tau is estimated (as
:mod:`planner.calibration.campaign_spread` does) only from the campaigns of the held-out item's
group, leaving the item's own campaign out (a shared row's campaign is its source on its GPU
type, as a published case's), and the item gets the band with that tau:

* ``pooled`` (shipped): every campaign never fitted, one tau;
* ``by model kind``: dense and MoE campaigns apart (candidate (b) of the brief, by regime);
* ``by extrapolation flag``: items whose plan flags extrapolation apart from the others
  (candidate (b), by flag).

A group with fewer than two campaigns left falls back to the pooled estimate. The shared rows
here keep the shipped table's centres and sigma_w (only tau is nested), so their figures are a
little kinder than ``bench/results/calibration.md``'s fully nested ones. Writes
``bench/results/published_bands_alternatives.json`` and prints a table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.accuracy import coefficients_for, load
from bench.published_bands_spread import case_deviation, is_new, published_campaign
from models_db.intervals import load_interval_table
from planner.calibration.campaign_spread import CampaignOffset, estimate, new_campaign_band
from planner.calibration.fit import cross_validate, usable
from planner.calibration.intervals import Band, IntervalTable, regime_parts
from planner.calibration.noise import campaign_key
from planner.performance.step_time import default_profile

RESULTS = Path(__file__).parent / "results"
Item = dict[str, Any]
GROUPINGS: dict[str, Callable[[Item], str]] = {
    "pooled": lambda it: "all",
    "by model kind": lambda it: it["kind"],
    "by extrapolation flag": lambda it: str(it["flag"]),
}
REPORTED: dict[str, Callable[[Item], bool]] = {
    "shared rows": lambda it: it["shared"],
    "published headline": lambda it: not it["shared"] and it["headline"],
    "new campaigns": lambda it: not it["shared"] and it["headline"] and it["new"],
    "MoE": lambda it: not it["shared"] and it["headline"] and it["kind"] == "moe",
    "dense": lambda it: not it["shared"] and it["headline"] and it["kind"] == "dense",
    "flagged": lambda it: not it["shared"] and it["headline"] and it["flag"],
}


def items(table: IntervalTable) -> list[Item]:
    """Every shared row (its leave-one-source-out deviation) and every banded published case."""
    rows = usable(load()[0])
    cv = cross_validate(rows, default_profile, group_by="source", coefficients_for=coefficients_for)
    out: list[Item] = []
    for m in rows:
        p = cv.predictions[m.row_id]
        _, band = table.band(regime_parts(m.model, m.cluster, m.job, m.layout.cp))
        dev = math.log(p["measured"] / p["after"]) - float(band.log_centre or 0.0)
        kind = "moe" if m.model.is_moe else "dense"
        out.append(_item(campaign_key(m), kind, False, dev, band, shared=True))
    fitted = {(m.source_id, m.cluster.gpu.name) for m in rows}
    published = json.loads((RESULTS / "published_check.json").read_text(encoding="utf-8"))
    for r in published["results"]:
        d = case_deviation(r, table.bands)
        if d is None:
            continue
        kind = "moe" if r["band"]["layout_regime"].startswith("moe") else "dense"
        band = table.bands[r["band"]["regime"]]
        flag = bool(r["band"]["extrapolation"])
        it = _item(published_campaign(r), kind, flag, d, band, shared=False)
        out.append({**it, "headline": r["headline"], "new": is_new(r, fitted)})
    return out


def _item(camp: str, kind: str, flag: bool, dev: float, band: Band, *, shared: bool) -> Item:
    return {"camp": camp, "kind": kind, "flag": flag, "dev": dev, "band": band,
            "shared": shared, "headline": True, "new": True}  # fmt: skip


def _offsets(sel: list[Item], leave: str) -> list[CampaignOffset]:
    """Campaign offsets of the estimate: shared rows and new published headline cases."""
    groups: dict[str, list[float]] = {}
    for it in sel:
        if it["camp"] != leave and it["headline"] and it["new"]:
            groups.setdefault(it["camp"], []).append(it["dev"])
    return [
        CampaignOffset(campaign=c, rows=len(v), mean_log_deviation=float(np.mean(v)))
        for c, v in sorted(groups.items())
    ]


def evaluate(all_items: list[Item], group: Callable[[Item], str], within: float) -> dict[str, Any]:
    hits: dict[str, list[tuple[bool, float]]] = {k: [] for k in REPORTED}
    for it in all_items:
        offs = _offsets([x for x in all_items if group(x) == group(it)], it["camp"])
        if len(offs) < 2:
            offs = _offsets(all_items, it["camp"])
        band = it["band"]
        low, high, _ = new_campaign_band(
            float(band.log_centre or 0.0),
            float(band.centre_log_sd or 0.0),
            estimate(offs, within),
            low_q=0.1,
            high_q=0.9,
            within_log_sd=band.within_log_sd,
        )
        ratio = math.exp(it["dev"] + float(band.log_centre or 0.0))
        for name, keep in REPORTED.items():
            if keep(it):
                hits[name].append((low <= ratio <= high, high - low))
    return {
        k: {
            "n": len(v),
            "inside": sum(a for a, _ in v),
            "median_width": float(np.median([w for _, w in v])),
        }
        for k, v in hits.items()
        if v
    }


def main() -> None:
    table = load_interval_table()
    if table is None or table.transfer is None:
        raise SystemExit("no transfer spread in models_db/intervals: run bench.calibration first")
    everything = items(table)
    result = {
        name: evaluate(everything, group, table.transfer.within_log_sd)
        for name, group in GROUPINGS.items()
    }
    path = RESULTS / "published_bands_alternatives.json"
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print("| rule | " + " | ".join(REPORTED) + " |")
    print("|---|" + "---|" * len(REPORTED))
    for name, res in result.items():
        cells = [
            f"{c['inside']} of {c['n']}, width {c['median_width']:.3f}"
            for c in (res[k] for k in REPORTED)
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.published_bands_alternatives",
        __doc__,
        writes="bench/results/published_bands_alternatives.json (and a table on stdout)",
        runtime="about 15 seconds",
    )
    parser.parse_args()
    main()
