"""Do the prediction bands a plan carries hold on published runs never fitted? (issue 12 item 9)

:mod:`bench.published_check` compares the planner's best layout for each published case with the
published figure. Here each case also gets the band a user sees on that plan: the performance
block of :func:`app.planning.report_build.ranked_plan`, the function every plan response (API,
web, CLI, SDK) is built by, so the regime key, the fallback to a parent regime, the
leave-one-GPU-type-out band of a transferred profile and the extrapolation warnings are the
response's own. The bands are ``models_db/intervals/throughput.json`` as shipped, built from the
shared rows' held-out residuals (``bench/calibration.py``) and widened by the between-campaign
spread tau, which the new campaigns of this check help estimate: the shipped bands are therefore
in-sample for them, and the out-of-sample coverage re-estimates tau with each case's campaign
left out (:func:`nested_bands`, ``bench/published_bands_spread.py``).

The band is one of measured / predicted tokens/s per GPU. A case compared on model TFLOP/s gets
the same band times the planner's predicted TFLOP/s, so it is the tokens/s comparison exactly
when the source counts FLOPs per token as the planner does; where it counts more (or fewer),
the published point moves by that factor (the metric column says which cases this is).

Each case is checked, independently of the planner's rule, against the calibration rows
themselves for the three ways the issue names a plan leaving the calibrated data (a GPU no row
ran, a MoE model with more experts or a larger top-k than any MoE row, a CP ring longer than
any row's or crossing nodes where no row's did), and for stack settings no row ran: a case
outside them whose plan does not say so is listed as a missing flag.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from app.planning.report_build import ranked_plan
from bench.accuracy import load
from bench.published_bands_spread import nested_summary, published_nested
from models_db.intervals import load_interval_table
from planner.calibration.fit import usable
from planner.calibration.intervals import stack_values
from planner.calibration.measurements import Measurement
from planner.performance.profile import PerformanceProfile
from planner.search.planning import Plan

READING = Path(__file__).with_name("published_bands_reading.md")
"""What the coverage says, written by hand from a run: appended to the section."""
NOMINAL = 0.8
"""The bands' nominal coverage (10th to 90th percentile, models_db/intervals)."""


def band_position(published: float, low: float, high: float) -> float | None:
    """How far the published value lies outside [low, high]: published / the nearest edge
    (> 1 above the band, < 1 below it); None inside."""
    if low <= published <= high:
        return None
    return published / (high if published > high else low)


def case_band(
    found: Plan, profile: PerformanceProfile, metric: str, published: float
) -> dict[str, Any]:
    """The band the plan response carries for ``found``, in the case's metric, and where the
    published value lies."""
    perf = ranked_plan(found, profile).performance
    interval = perf.tokens_per_s_per_gpu_interval
    tokens = perf.tokens_per_s_per_gpu
    if not interval or not tokens:  # no table shipped, or no prediction: nothing to check
        return {"regime": None}
    low, high = interval[0] / tokens, interval[1] / tokens
    predicted = float(getattr(perf, metric))
    edge_low, edge_high = predicted * low, predicted * high
    miss = band_position(published, edge_low, edge_high)
    info = perf.interval or {}
    return {
        "regime": info.get("regime"),
        "layout_regime": info.get("layout_regime"),
        "fallback": info.get("fallback"),
        "ratio_band": [low, high],
        "band": [edge_low, edge_high],
        "inside": miss is None,
        "miss": miss,
        "extrapolation": list(perf.extrapolation or []),
        "missing_flags": missing_flags(found, list(perf.extrapolation or [])),
    }


# --- the independent check of the extrapolation flags ------------------------------------------


@functools.lru_cache(maxsize=1)
def calibration_rows() -> tuple[Measurement, ...]:
    """The rows the shipped bands and profiles were built from (bench/calibration.py's)."""
    return tuple(usable(load()[0]))


def outside(found: Plan, rows: Iterable[Measurement]) -> dict[str, str]:
    """Why ``found`` lies outside the calibration ``rows``, read from the rows themselves: a
    key per reason (its words the plan's warning must contain) and what the rows show."""
    rows = list(rows)
    model, cluster, job, lay = found.model, found.cluster, found.job, found.layout
    out: dict[str, str] = {}
    if not any(m.cluster.gpu.name == cluster.gpu.name for m in rows):
        out["not fitted to measurements of this GPU"] = f"no row ran {cluster.gpu.name}"
    if model.is_moe:
        moe = [m.model for m in rows if m.model.is_moe]
        if not any(
            (x.num_experts or 0) >= (model.num_experts or 0)
            and x.moe_router_topk >= model.moe_router_topk
            for x in moe
        ):
            out["fine-grained MoE"] = (
                f"{model.num_experts} experts top-{model.moe_router_topk}: no MoE row has as many"
            )
    if lay.cp > 1:
        crosses = lay.tp * lay.cp > cluster.gpus_per_node
        ring = [m for m in rows if m.layout.cp >= lay.cp]
        if not ring:
            out[f"cp={lay.cp}"] = f"no row ran cp >= {lay.cp}"
        elif crosses and not any(m.layout.tp * m.layout.cp > m.cluster.gpus_per_node for m in ring):
            out["context parallelism across nodes"] = "no row's CP ring crossed nodes"
    seen: dict[str, set[str]] = {}
    for m in rows:
        for name, value in stack_values(m.model, m.cluster, m.job, m.layout).items():
            seen.setdefault(name, set()).add(value)
    for name, value in stack_values(model, cluster, job, lay).items():
        if name in seen and value not in seen[name]:
            out[f"{name}={value}"] = f"no row ran {name}={value}"
    return out


def missing_flags(found: Plan, warnings: list[str]) -> list[str]:
    """The reasons :func:`outside` finds that none of the plan's warnings states."""
    return [
        f"{key} ({why})"
        for key, why in outside(found, calibration_rows()).items()
        if not any(key in w for w in warnings)
    ]


# --- coverage ----------------------------------------------------------------------------------


def coverage(rows: list[dict[str, Any]], group: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """Per group of cases with a band: cases, how many lie inside and the share; of those
    outside, how many lie below the band (the run was slower) and above it, and the median
    factor by which they miss (published / edge or its inverse, >= 1; None: none outside)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        g = out.setdefault(group(r), {"n": 0, "inside": 0, "misses": []})
        g["n"] += 1
        g["inside"] += int(r["band"]["inside"])
        if not r["band"]["inside"]:
            g["misses"].append(r["band"]["miss"])
    return {
        k: {
            "n": g["n"],
            "inside": g["inside"],
            "coverage": g["inside"] / g["n"],
            "below": sum(m < 1 for m in g["misses"]),
            "above": sum(m > 1 for m in g["misses"]),
            "median_factor": (
                float(np.median([max(m, 1 / m) for m in g["misses"]])) if g["misses"] else None
            ),
        }
        for k, g in out.items()
    }


def campaign(r: dict[str, Any]) -> str:
    """Whether the case's source ran other rows on the same GPU type that the profile and the
    bands were fitted on (a known campaign: its shared error is in the fit) or not (a new
    campaign: what the bands are built to cover, :mod:`planner.calibration.interval_bands`)."""
    fitted = {(m.source_id, m.cluster.gpu.name) for m in calibration_rows()}
    known = (r["source"].split(":")[0], r["gpu"]) in fitted
    return "a campaign in the fit" if known else "a new campaign"


def _flagged(r: dict[str, Any]) -> str:
    return "plan flags extrapolation" if r["band"]["extrapolation"] else "no flag"


def band_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage of the plans' bands over the cases that have one: the headline cases overall,
    per series, per band regime and split by whether the plan flags extrapolation; the
    out-of-headline cases apart; and every case whose plan misses a flag it should carry."""
    banded = [r for r in results if (r.get("band") or {}).get("regime")]
    head = [r for r in banded if r["headline"]]
    rest = [r for r in banded if not r["headline"]]

    def everyone(_: dict[str, Any]) -> str:
        return "all"

    return {
        "nominal": NOMINAL,
        "headline": coverage(head, everyone).get("all"),
        "out_of_headline": coverage(rest, everyone).get("all"),
        "series": coverage(banded, lambda r: r["series"]),
        "regime": coverage(head, lambda r: r["band"]["regime"]),
        "campaign": coverage(head, campaign),
        "kind": coverage(head, lambda r: r["band"]["layout_regime"].split("/")[0]),
        "flagged": coverage(head, _flagged),
        "fell_back": coverage(
            head, lambda r: "not the layout's own regime" if r["band"]["fallback"] else "own regime"
        ),
        "missing_flags": {
            r["case"]: r["band"]["missing_flags"] for r in banded if r["band"]["missing_flags"]
        },
        "nested": nested_bands(banded),
    }


def nested_bands(banded: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The out-of-sample coverage: each case against the band its plan would carry with tau
    estimated without the case's campaign (bench.published_bands_spread); None without a
    transfer spread in the table."""
    table = load_interval_table()
    if table is None or table.transfer is None:
        return None
    fitted = {(m.source_id, m.cluster.gpu.name) for m in calibration_rows()}
    cases = published_nested(banded, table, fitted)
    return {
        "tau": table.transfer.log_sd,
        "df": table.transfer.df,
        "campaigns": len(table.transfer.campaigns),
        "published_campaigns": table.transfer.published_campaigns,
        "summary": nested_summary(cases),
        "cases": {c["case"]: c for c in cases},
    }


# --- the results page --------------------------------------------------------------------------


def shared_row_coverage() -> float | None:
    """The bands' nested leave-one-source-out coverage on the shared rows (calibration.json)."""
    path = Path(__file__).parent / "results" / "calibration.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return float(data["intervals"]["coverage_nested_by_source"]["all"]["inside"])


def _pct(c: dict[str, Any] | None) -> str:
    return "n/a" if not c else f"{c['inside']} of {c['n']} ({100 * c['coverage']:.0f} %)"


def _miss(c: dict[str, Any]) -> str:
    if c["median_factor"] is None:
        return "| | |"
    return f"| {c['below']} / {c['above']} | {c['median_factor']:.3f} |"


def _table(title: str, groups: dict[str, Any]) -> list[str]:
    lines = [
        f"| {title} | inside the band | outside: below / above | median factor outside |",
        "|---|---|---|---|",
    ]
    lines += [f"| {k} | {_pct(c)} {_miss(c)}" for k, c in groups.items()]
    return [*lines, ""]


def _nested_cell(n: dict[str, Any], r: dict[str, Any]) -> str:
    """The nested band in the case's metric, and whether the published value lies inside."""
    lo, hi = r["predicted"] * n["low"], r["predicted"] * n["high"]
    return f"{lo:.4g}-{hi:.4g} {'inside' if n['inside'] else 'outside'}"


def nested_markdown(nested: dict[str, Any] | None) -> list[str]:
    """The out-of-sample coverage of the new-campaign band (bench.published_bands_spread)."""
    if not nested:
        return ["No transfer spread in the interval table: no nested coverage.", ""]
    summ = nested["summary"]
    lines = [
        f"**Out of sample** (tau {nested['tau']:.3f} shipped, from {nested['campaigns']} campaigns "
        f"never fitted, {nested['published_campaigns']} of them published campaigns of this "
        "check; here re-estimated with the case's own campaign left out, so no case informs its "
        "own band; campaigns already in the fit are not in the estimate): "
        + "; ".join(
            f"{k} {v['inside']} of {v['n']} ({100 * v['coverage']:.0f} %)" for k, v in summ.items()
        )
        + ".",
        "",
        "| cases | inside the nested band | median band width (measured / predicted) | tau used |",
        "|---|---|---|---|",
    ]
    for k, v in summ.items():
        lo, hi = v["tau_range"]
        lines.append(
            f"| {k} | {v['inside']} of {v['n']} ({100 * v['coverage']:.0f} %) | "
            f"{v['median_width']:.3f} | {lo:.3f}-{hi:.3f} |"
        )
    shared = shared_new_rule()
    if shared:
        lines += [
            "",
            f"The same rule on the shared rows, each source left out of the centre, sigma_w and "
            f"tau (bench/results/calibration.md): {100 * shared['inside']:.1f} % of "
            f"{shared['n']} rows inside, median width {shared['median_width']:.3f}.",
        ]
    return [*lines, ""]


def shared_new_rule() -> dict[str, Any] | None:
    """The new-campaign band's nested coverage on the shared rows (calibration.json)."""
    path = Path(__file__).parent / "results" / "calibration.json"
    if not path.exists():
        return None
    rule = json.loads(path.read_text(encoding="utf-8"))["intervals"].get("new_campaign_rule")
    return None if rule is None else dict(rule["coverage_nested_by_source"])


def bands_markdown(bands: dict[str, Any] | None, results: list[dict[str, Any]]) -> list[str]:
    """The results page's section on the plans' bands (empty without a band summary)."""
    if not bands:
        return []
    head, nested = bands["headline"], shared_row_coverage()
    nested_text = "n/a" if nested is None else f"{100 * nested:.1f} %"
    lines = [
        "",
        "## Do the plans' prediction bands hold on these runs? (issue 12 item 9)",
        "",
        "Each case's band is the one the plan response carries for the planner's chosen layout "
        "(the layout of the table above; `app.planning.report_build.ranked_plan`, as the API, "
        "web page and CLI show it): the 80 % band of measured / predicted tokens/s per GPU of "
        "the layout's regime, or of the parent regime it falls back to, or the "
        "leave-one-GPU-type-out band for a transferred GPU profile, widened for a campaign the "
        "fit never saw (`planner/calibration/campaign_spread.py`): its between-campaign sd tau "
        "is estimated from the shared rows' campaigns *and the new campaigns of this check*, so "
        "the shipped band is in-sample for these runs; the out-of-sample figure is the nested "
        "one below (tau re-estimated with each campaign left out). Nothing else (centre, "
        "within-campaign sd, coefficients, point predictions) learns from these runs. "
        "TFLOP/s cases get the same band times the predicted TFLOP/s: "
        "the comparison is the tokens/s one only where the source counts FLOPs per token as the "
        "planner does (Llama 3: Meta's count is unknown; the MoE cards: Megatron's/Bridge's "
        "count, not checked against ours). *edge*: published / the nearest band edge (> 1: the "
        "run was faster than the band's top, < 1: slower than its bottom); *factor outside*: that "
        "ratio or its inverse, whichever is >= 1.",
        "",
        f"Headline coverage of the shipped bands (in-sample for tau): {_pct(head)} against the "
        f"nominal {100 * bands['nominal']:.0f} %; the table's bands with the shared rows' sigma_b "
        f"reach {nested_text} on the shared rows with each source left out "
        "(bench/results/calibration.md). Out of the headline: "
        f"{_pct(bands['out_of_headline'])}.",
        "",
        *nested_markdown(bands.get("nested")),
    ]
    lines += _table("series (all cases)", bands["series"])
    lines += _table("band regime (headline)", bands["regime"])
    lines += _table("source (headline)", bands["campaign"])
    lines += _table("model (headline)", bands["kind"])
    lines += _table("extrapolation (headline)", bands["flagged"])
    lines += _table("band source (headline)", bands["fell_back"])
    missing = bands["missing_flags"]
    lines += [
        "Extrapolation flags checked against the calibration rows themselves (a GPU no row "
        "ran, more experts or a larger top-k than any MoE row, a longer CP ring or one crossing "
        "nodes where no row's did, a stack setting no row ran): "
        + (
            "every case outside them carries the flag."
            if not missing
            else "flags missing on " + "; ".join(f"{k}: {', '.join(v)}" for k, v in missing.items())
        ),
        "",
        "| case | headline | band regime (layout's regime) | band | published | edge | "
        "nested band (tau without the case's campaign) | plan's extrapolation warnings |",
        "|---|---|---|---|---|---|---|---|",
    ]
    held = (bands.get("nested") or {}).get("cases", {})
    for r in results:
        b = r.get("band") or {}
        if not b.get("regime"):
            continue
        own = "" if b["layout_regime"] == b["regime"] else f" ({b['layout_regime']})"
        edge = "inside" if b["inside"] else f"{b['miss']:.4f}"
        warn = "; ".join(w.split(":")[0] for w in b["extrapolation"]) or "none"
        n = held.get(r["case"])
        out = "n/a" if n is None else _nested_cell(n, r)
        lines.append(
            f"| {r['case']} | {'yes' if r['headline'] else 'no'} | {b['regime']}{own} | "
            f"{b['band'][0]:.4g}-{b['band'][1]:.4g} | {r['published']:.4g} | {edge} | {out} | "
            f"{warn} |"
        )
    if READING.exists():  # the hand-written reading of these numbers (dated inside)
        lines += ["", READING.read_text(encoding="utf-8").rstrip()]
    return lines
