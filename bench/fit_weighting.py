"""The fit weighting (the ridge's strength) chosen by cross-validation, reported by nested CV.

Run ``python -m bench.fit_weighting``. Writes ``bench/results/fit_weighting.{md,json}``.

The rule (``bench/results/noise.md``, committed before this ran): the fit pair is
m x ``BASE`` (the REML prediction pair, rho kept) for m in ``GRID``; the criterion is the median
|error| of leave-one-source-out on the training sources, a tie (within ``TIE``) going to the
larger m (the stronger prior). Shipped: the choice on all sources. Reported: for each outer
held-out source, m chosen on the other three, the held-out source predicted by the fit on those
three with that m (nested cross-validation, Varma & Simon 2006, BMC Bioinformatics 7:91).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from bench.accuracy import RESULTS, coefficients_for, commit, load
from planner.calibration.fit import cross_validate, usable
from planner.calibration.measurements import Measurement
from planner.calibration.regularised import FIT_ROW_LOG_SD, FIT_SHARED_LOG_SD
from planner.performance.step_time import default_profile

BASE = (0.052, 0.030)
"""The REML pair (sigma_w, sigma_b) the grid scales (``bench/results/noise.md``)."""
GRID = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
"""Multipliers of ``BASE``, fixed before the bench ran (why: ``bench/results/noise.md``)."""
TIE = 0.0005
"""Medians within 0.05 percentage points (half the benches' 0.1 % precision) are a tie."""
DECIMALS = 3

Loso = Callable[[Sequence[Measurement], float], dict[str, float]]
"""(rows, m) -> each row's |error| when its source is held out of a fit weighted with m."""


def pair(m: float) -> tuple[float, float]:
    """The fit pair (sigma_w, sigma_b) of multiplier m, unrounded (the grid's evaluation)."""
    return m * BASE[0], m * BASE[1]


def shipped_pair(m: float) -> tuple[float, float]:
    """The pair shipped for multiplier m: rounded to ``DECIMALS`` decimals."""
    w, b = pair(m)
    return round(w, DECIMALS), round(b, DECIMALS)


def loso_errors(rows: Sequence[Measurement], m: float) -> dict[str, float]:
    """|predicted / measured - 1| of each row, its source held out (the accuracy bench's fold)."""
    w, b = pair(m)
    cv = cross_validate(
        rows,
        default_profile,
        group_by="source",
        coefficients_for=coefficients_for,
        noise=w,
        shared_noise=b,
    )
    return {k: abs(p["after"] / p["measured"] - 1.0) for k, p in cv.predictions.items()}


def choose(scores: Mapping[float, float], tie: float = TIE) -> float:
    """The m with the smallest score; among those within ``tie`` of it, the largest m."""
    if not scores:
        raise ValueError("choose needs at least one grid point")
    best = min(scores.values())
    return max(m for m, s in scores.items() if s <= best + tie)


def inner_scores(
    rows: Sequence[Measurement], grid: Sequence[float], loso: Loso
) -> dict[float, float]:
    """The criterion for every m: median |error| of leave-one-source-out on ``rows``."""
    return {m: float(np.median(list(loso(rows, m).values()))) for m in grid}


def nested(
    rows: Sequence[Measurement], grid: Sequence[float] = GRID, loso: Loso = loso_errors
) -> dict[str, Any]:
    """The all-sources choice and the nested estimate of the rule's error.

    The outer fold of source s with multiplier m is the row's leave-one-source-out error on
    all rows with m: that fit is the fit on the other sources, so one table per m serves both
    the all-sources criterion and every outer fold's scoring."""
    outer_table = {m: loso(rows, m) for m in grid}
    overall = {m: float(np.median(list(t.values()))) for m, t in outer_table.items()}
    chosen = choose(overall)
    folds: dict[str, Any] = {}
    nested_err: dict[str, float] = {}
    for source in sorted({r.source_id for r in rows}):
        train = [r for r in rows if r.source_id != source]
        scores = inner_scores(train, grid, loso)
        m = choose(scores)
        held = {r.row_id: outer_table[m][r.row_id] for r in rows if r.source_id == source}
        nested_err.update(held)
        folds[source] = {
            "rows": len(held),
            "inner_medians": {str(k): v for k, v in scores.items()},
            "chosen_m": m,
            "median_ape": float(np.median(list(held.values()))),
            "median_ape_at_shipped_m": float(np.median([outer_table[chosen][k] for k in held])),
        }
    errs = np.array(list(nested_err.values()))
    shipped = np.array(list(outer_table[chosen].values()))
    return {
        "grid": list(grid),
        "loso_median_by_m": {str(k): v for k, v in overall.items()},
        "loso_p90_by_m": {
            str(k): float(np.percentile(list(t.values()), 90)) for k, t in outer_table.items()
        },
        "chosen_m": chosen,
        "loso_at_chosen": {"median_ape": float(np.median(shipped)), "p90_ape": _p90(shipped)},
        "nested": {"median_ape": float(np.median(errs)), "p90_ape": _p90(errs), "n": len(errs)},
        "folds": folds,
    }


def _p90(x: np.ndarray) -> float:
    return float(np.percentile(x, 90))


def run() -> dict[str, Any]:
    rows = usable(load()[0])
    t0 = time.perf_counter()
    res = nested(rows)
    return {
        "commit": commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": len(rows),
        "base": list(BASE),
        "tie": TIE,
        **res,
        "rule_output": list(shipped_pair(res["chosen_m"])),
        "shipped": [FIT_ROW_LOG_SD, FIT_SHARED_LOG_SD],
        "seconds": time.perf_counter() - t0,
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def markdown(r: dict[str, Any]) -> str:
    grid = r["grid"]
    lines = [
        "# Fit weighting: chosen by cross-validation, reported by nested cross-validation",
        "",
        "Written by `python -m bench.fit_weighting`; the rule is in `bench/results/noise.md`",
        f"(committed before this ran). Commit `{r['commit']}`, {r['date']}; {r['rows']} usable "
        f"shared rows; {r['seconds']:.0f} s. Fit pair = m x ({r['base'][0]}, {r['base'][1]}), "
        f"tie = {100 * r['tie']:.2f} percentage points -> larger m.",
        "",
        "## Leave-one-source-out on all sources (the criterion that chooses the shipped pair)",
        "",
        "| m | sigma_w / sigma_b | median | p90 |",
        "|---|---|---|---|",
    ]
    for m in grid:
        w, b = pair(m)
        lines.append(
            f"| {m:g} | {w:.3f} / {b:.4f} | {_pct(r['loso_median_by_m'][str(m)])} | "
            f"{_pct(r['loso_p90_by_m'][str(m)])} |"
        )
    rw, rb = r["rule_output"]
    lines += [
        "",
        f"Chosen m = {r['chosen_m']:g}: fit pair {rw} / {rb} (rounded); shipped in "
        f"`planner/calibration/regularised.py`: {r['shipped'][0]} / {r['shipped'][1]}.",
        "",
        "## Nested cross-validation (m chosen without the held-out source)",
        "",
        "| held-out source | rows | inner medians by m ("
        + ", ".join(f"{m:g}" for m in grid)
        + ") | chosen m | held-out median | held-out median at the shipped m |",
        "|---|---|---|---|---|---|",
    ]
    for s, f in r["folds"].items():
        inner = " / ".join(_pct(f["inner_medians"][str(m)]) for m in grid)
        lines.append(
            f"| {s} | {f['rows']} | {inner} | {f['chosen_m']:g} | {_pct(f['median_ape'])} | "
            f"{_pct(f['median_ape_at_shipped_m'])} |"
        )
    n, a = r["nested"], r["loso_at_chosen"]
    lines += [
        "",
        f"Nested estimate over all {n['n']} rows: median {_pct(n['median_ape'])}, p90 "
        f"{_pct(n['p90_ape'])}. Leave-one-source-out of the shipped m (chosen on these same "
        f"folds, so optimistic): median {_pct(a['median_ape'])}, p90 {_pct(a['p90_ape'])}.",
        "",
    ]
    return "\n".join(lines)


def write(r: dict[str, Any]) -> None:
    RESULTS.joinpath("fit_weighting.json").write_text(
        json.dumps(r, indent=1, default=float) + "\n", encoding="utf-8"
    )
    RESULTS.joinpath("fit_weighting.md").write_text(markdown(r), encoding="utf-8")


def main() -> None:
    r = run()
    write(r)
    print(markdown(r), file=sys.stdout)


if __name__ == "__main__":
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.fit_weighting",
        __doc__,
        writes="bench/results/fit_weighting.{json,md}",
        runtime="about 3 minutes on two cores (167 s in the committed run)",
    )
    parser.parse_args()
    main()
