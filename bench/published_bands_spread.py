"""The between-campaign spread of a new campaign, estimated and checked out of sample (issue 12
item 9; the rule: :mod:`planner.calibration.campaign_spread`).

Two benches use this module:

* ``bench.calibration`` builds the interval table. It estimates tau from the campaigns never
  fitted: the shared rows' four (each row's leave-one-source-out log ratio minus its band's
  centre) and the published campaigns of ``bench/results/published_check.json`` (each headline
  case's log(published / predicted) minus the centre of the band its plan used), and writes it
  under ``transfer`` in ``models_db/intervals/throughput.json``. Its nested shared-row coverage
  re-estimates tau without the held-out source (:func:`shared_nested_coverage`).
* ``bench.published_check`` measures the band on the published runs. Its nested coverage
  (:func:`published_nested`) re-estimates tau with each published campaign left out, from the
  table's shared offsets and the other published campaigns of the same run, and gives each of
  the campaign's cases the band the response would carry with that tau: the published runs
  never inform their own campaign's band.

Only tau learns from the published runs: the centres, sigma_w, the coefficients and every point
prediction come from the shared rows alone.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from planner.calibration.campaign_spread import (
    CampaignOffset,
    TransferSpread,
    estimate,
    new_campaign_band,
)
from planner.calibration.intervals import Band, IntervalTable, regime_parts
from planner.calibration.measurements import Measurement
from planner.calibration.noise import campaign_key

FittedCampaigns = set[tuple[str, str]]
"""(source_id, GPU type) of the rows the fit saw: a published case of one is not new."""


def published_campaign(r: dict[str, Any]) -> str:
    """A published case's campaign on its GPU type: the source id where the case comes from the
    shared CSV (its text starts with an id, e.g. 'megatron_readme_h100: ...': one repository's
    runs), else the citation before any '[' note (the document, and for NVIDIA's write-up the
    row, i.e. the stack)."""
    head = r["source"].split(":")[0]
    name = head if " " not in head else r["source"].split(" [")[0].strip()
    return f"{name}|{r['gpu']}"


def is_new(r: dict[str, Any], fitted: FittedCampaigns) -> bool:
    """Whether no row of the fit comes from the case's source on its GPU type
    (``bench.published_bands.campaign``'s test)."""
    return (r["source"].split(":")[0], r["gpu"]) not in fitted


def _offsets(devs: Iterable[tuple[str, float]], kind: str) -> list[CampaignOffset]:
    groups: dict[str, list[float]] = defaultdict(list)
    for camp, d in devs:
        groups[camp].append(d)
    return [
        CampaignOffset(campaign=c, rows=len(v), mean_log_deviation=float(np.mean(v)), kind=kind)
        for c, v in sorted(groups.items())
    ]


def shared_offsets(
    table: IntervalTable, rows: Sequence[Measurement], ratios: np.ndarray
) -> list[CampaignOffset]:
    """Each shared campaign's mean held-out log ratio minus the centres of its rows' bands."""

    def dev(m: Measurement, r: float) -> tuple[str, float]:
        _, band = table.band(regime_parts(m.model, m.cluster, m.job, m.layout.cp))
        return campaign_key(m), math.log(r) - float(band.log_centre or 0.0)

    return _offsets((dev(m, r) for m, r in zip(rows, ratios, strict=True)), "shared")


def case_deviation(r: dict[str, Any], bands: dict[str, Band]) -> float | None:
    """log(published / predicted) minus the centre of the band the case's plan used (None: no
    band, or the table has no such regime)."""
    band = bands.get((r.get("band") or {}).get("regime") or "")
    if band is None or band.log_centre is None or not r.get("ratio"):
        return None
    return -math.log(r["ratio"]) - band.log_centre


def published_offsets(
    results: Iterable[dict[str, Any]], bands: dict[str, Band], fitted: FittedCampaigns
) -> list[CampaignOffset]:
    """The headline cases of new campaigns, as campaign offsets (the estimate's published part)."""
    devs = []
    for r in results:
        d = case_deviation(r, bands)
        if d is not None and r["headline"] and is_new(r, fitted):
            devs.append((published_campaign(r), d))
    return _offsets(devs, "published")


def _band_of(table: IntervalTable, band: Band, spread: TransferSpread) -> tuple[float, float]:
    low, high, _ = new_campaign_band(
        float(band.log_centre or 0.0),
        float(band.centre_log_sd or 0.0),
        spread,
        low_q=table.low_quantile,
        high_q=table.high_quantile,
        within_log_sd=band.within_log_sd,
    )
    return low, high


def published_nested(
    results: list[dict[str, Any]], table: IntervalTable, fitted: FittedCampaigns
) -> list[dict[str, Any]]:
    """Each banded case with its band under tau estimated without the case's campaign (the
    table's shared offsets plus the other new published campaigns of ``results``): low, high,
    inside, the campaign, whether it is new, and the tau and df used."""
    if table.transfer is None:
        return []
    shared = [c for c in table.transfer.campaigns if c.kind == "shared"]
    published = published_offsets(results, table.bands, fitted)
    within = table.transfer.within_log_sd
    out = []
    for r in results:
        d = case_deviation(r, table.bands)
        if d is None:
            continue
        camp = published_campaign(r)
        spread = estimate([*shared, *published], within, leave_out=camp)
        low, high = _band_of(table, table.bands[r["band"]["regime"]], spread)
        ratio = math.exp(d + float(table.bands[r["band"]["regime"]].log_centre or 0.0))
        out.append(
            {
                "case": r["case"],
                "campaign": camp,
                "new": is_new(r, fitted),
                "headline": r["headline"],
                "moe": r["band"]["layout_regime"].startswith("moe"),
                "flagged": bool(r["band"]["extrapolation"]),
                "low": low,
                "high": high,
                "inside": low <= ratio <= high,
                "tau": spread.log_sd,
                "df": spread.df,
            }
        )
    return out


def nested_summary(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage and median band width (high - low of measured / predicted) per group."""
    head = [c for c in cases if c["headline"]]
    groups: dict[str, Callable[[dict[str, Any]], bool]] = {
        "all headline": lambda c: True,
        "new campaigns": lambda c: c["new"],
        "campaigns in the fit": lambda c: not c["new"],
        "MoE": lambda c: c["moe"],
        "dense": lambda c: not c["moe"],
        "plan flags extrapolation": lambda c: c["flagged"],
        "no flag": lambda c: not c["flagged"],
    }
    out = {}
    for name, keep in groups.items():
        sel = [c for c in head if keep(c)]
        if sel:
            out[name] = _cover(sel)
    rest = [c for c in cases if not c["headline"]]
    if rest:
        out["out of headline"] = _cover(rest)
    return out


def _cover(sel: list[dict[str, Any]]) -> dict[str, Any]:
    inside = sum(c["inside"] for c in sel)
    return {
        "n": len(sel),
        "inside": inside,
        "coverage": inside / len(sel),
        "median_width": float(np.median([c["high"] - c["low"] for c in sel])),
        "tau_range": [min(c["tau"] for c in sel), max(c["tau"] for c in sel)],
    }


def shared_nested_coverage(
    held: Sequence[Measurement],
    held_ratios: np.ndarray,
    sub: IntervalTable,
    train_offsets: list[CampaignOffset],
    published: list[CampaignOffset],
    within: float,
) -> tuple[list[bool], list[float], TransferSpread]:
    """The held-out source's rows against ``sub`` (a table built without it) with tau from the
    other shared campaigns and the published ones: inside per row, band widths, the spread."""
    spread = estimate([*train_offsets, *published], within)
    hits, widths = [], []
    for m, r in zip(held, held_ratios, strict=True):
        _, band = sub.band(regime_parts(m.model, m.cluster, m.job, m.layout.cp))
        low, high = _band_of(sub, band, spread)
        hits.append(bool(low <= r <= high))
        widths.append(high - low)
    return hits, widths, spread


BuildBands = Callable[[list[int]], tuple[dict[str, Any], float]]
"""Bands (the transferred-GPU one included) of the rows at these indices, built from their
ratios alone, and the sigma_w they used (bench.calibration's rule)."""


def shared_nested(
    data: dict[str, Any],
    rows: list[Measurement],
    ratio: np.ndarray,
    build: BuildBands,
    results: list[dict[str, Any]],
    fitted: FittedCampaigns,
) -> dict[str, Any]:
    """Each shared source's rows against a table built without it, with tau estimated without
    it too (the other sources' offsets from that table's centres, and the published campaigns'
    from the same centres): coverage, median width and the tau per held-out source."""
    hits: list[bool] = []
    widths: list[float] = []
    per_source = {}
    for source in sorted({m.source_id for m in rows}):
        train = [i for i, m in enumerate(rows) if m.source_id != source]
        held = [i for i, m in enumerate(rows) if m.source_id == source]
        bands, within = build(train)
        sub = IntervalTable.from_dict({**data, "bands": bands, "transfer": None})
        mine = shared_offsets(sub, [rows[i] for i in train], ratio[train])
        pub = published_offsets(results, sub.bands, fitted)
        h, w, spread = shared_nested_coverage(
            [rows[i] for i in held], ratio[held], sub, mine, pub, within
        )
        hits += h
        widths += w
        per_source[source] = {
            "n": len(h),
            "inside": float(np.mean(h)),
            "tau": spread.log_sd,
            "df": spread.df,
            "median_width": float(np.median(w)),
        }
    return {
        "all": {
            "n": len(hits),
            "inside": float(np.mean(hits)),
            "median_width": float(np.median(widths)),
        },
        "sources": per_source,
    }


def transfer_markdown(iv: dict[str, Any]) -> list[str]:
    """bench/results/calibration.md's section on the band a response shows (the new-campaign
    rule), from ``intervals`` of calibration.json."""
    rule = iv.get("new_campaign_rule")
    if not rule:
        return []
    t, cov = rule["transfer"], rule["coverage_nested_by_source"]
    old = iv["coverage_nested_by_source"]["all"]
    lines = [
        "## The band a plan shows: widened for a campaign the fit never saw",
        "",
        "The table's bands above use the shared rows' sigma_b (REML on 4 campaigns). The band a "
        "response carries replaces it by tau, the between-campaign sd of every campaign never "
        "fitted: the shared rows' campaigns (held-out log ratio minus the band centre) and the "
        "new campaigns of the published check (`bench/results/published_check.json`, headline "
        "cases: log(published / predicted) minus the centre of the band the plan used); maximum "
        "likelihood with the mean fixed at the band's centre and sigma_w fixed at the shared "
        "rows' (`planner/calibration/campaign_spread.py`). Only tau learns from the published "
        "runs; their own out-of-sample coverage (tau re-estimated with each campaign left out) "
        "is on `bench/results/published_check.md`.",
        "",
        f"tau {t['log_sd']:.4f} (log), t quantile on {t['df']} degrees of freedom, sigma_w "
        f"{t['within_log_sd']}:",
        "",
        "| campaign | kind | rows | mean log deviation from the band centre |",
        "|---|---|---|---|",
    ]
    for c in t["campaigns"]:
        lines.append(
            f"| {c['campaign'].replace('|', ' on ')} | {c['kind']} | {c['rows']} | "
            f"{c['mean_log_deviation']:+.4f} |"
        )
    lines += [
        "",
        "Nested on the shared rows (each source left out of the centre, sigma_w *and* tau): "
        f"{100 * cov['inside']:.1f} % of {cov['n']} rows inside, median width "
        f"{cov['median_width']:.3f}, against {100 * old['inside']:.1f} % and "
        f"{old['median_width']:.3f} with the shared rows' sigma_b. Per held-out source:",
        "",
        "| held-out source | rows | inside | tau without it | df | median width |",
        "|---|---|---|---|---|---|",
    ]
    for src, c in rule["nested_by_held_out_source"].items():
        lines.append(
            f"| {src} | {c['n']} | {100 * c['inside']:.1f} % | {c['tau']:.4f} | {c['df']} | "
            f"{c['median_width']:.3f} |"
        )
    return [*lines, ""]
