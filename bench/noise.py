"""The prediction noise (bands, level, suggest), by its rule (``bench/results/noise.md``).

Run ``python -m bench.noise``. Writes ``bench/results/noise.json`` and the numbers section of
``bench/results/noise.md`` (the rule's text above it is kept as written).

The rule: leave-one-source-out log residuals of the shipped fit (weighted by the fit pair,
``regularised.FIT_NOISE``, chosen by ``bench.fit_weighting``) on the shared rows, REML with
campaigns (source x GPU type) as groups (:mod:`planner.calibration.variance_components`);
shipped rounded to ``DECIMALS`` decimals. Before the two roles were split the fit used this
pair too, so the rule was a fixed point (``fixed_point``, kept for that comparison); now the fit
does not read it and one round is the rule.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import numpy as np

from bench.accuracy import RESULTS, coefficients_for, commit, load
from planner.calibration.fit import cross_validate, usable
from planner.calibration.measurements import Measurement
from planner.calibration.noise import NoiseModel, campaign_key
from planner.calibration.regularised import FIT_NOISE, NOISE
from planner.calibration.variance_components import VarianceComponents, reml
from planner.performance.step_time import default_profile

START = (0.066, 0.043)
"""The pair shipped before this rule (ANOVA on the priors' residuals): the iteration's start."""
TOLERANCE = 0.0005
"""The fixed point is reached when both components change by less than this (the rounding)."""
MAX_ROUNDS = 10
DECIMALS = 3
MARKER = "## Numbers (written by `python -m bench.noise`)"


def held_out_log_residuals(
    rows: list[Measurement], noise: NoiseModel, group_by: str = "source"
) -> np.ndarray:
    """log(measured / predicted) of each row, predicted by the fit without the row's group."""
    cv = cross_validate(
        rows,
        default_profile,
        group_by=group_by,
        coefficients_for=coefficients_for,
        noise=noise.within_log_sd,
        shared_noise=noise.shared_log_sd,
    )
    return np.array(
        [
            np.log(cv.predictions[m.row_id]["measured"] / cv.predictions[m.row_id]["after"])
            for m in rows
        ]
    )


def rule_step(rows: list[Measurement], noise: NoiseModel) -> VarianceComponents:
    """One round of the rule: the fit weighted by ``noise``, its held-out residuals, REML."""
    return reml(held_out_log_residuals(rows, noise), [campaign_key(m) for m in rows])


def fixed_point(rows: list[Measurement]) -> dict[str, Any]:
    """Iterate the rule from ``START``; the path, the last estimate and whether it converged."""
    current = NoiseModel(within_log_sd=START[0], shared_log_sd=START[1])
    path: list[dict[str, Any]] = []
    est = rule_step(rows, current)
    for _ in range(MAX_ROUNDS):
        path.append({"used": [current.within_log_sd, current.shared_log_sd], **est.to_dict()})
        converged = (
            abs(est.within_log_sd - current.within_log_sd) < TOLERANCE
            and abs(est.shared_log_sd - current.shared_log_sd) < TOLERANCE
        )
        if converged:
            break
        current = est.noise
        est = rule_step(rows, current)
    return {"path": path, "estimate": est, "converged": converged}


def run() -> dict[str, Any]:
    code = commit()
    rows = usable(load()[0])
    t0 = time.perf_counter()
    est = rule_step(rows, FIT_NOISE)
    return {
        "commit": code,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": len(rows),
        "campaign_rows": dict(sorted(Counter(campaign_key(m) for m in rows).items())),
        "fit_pair": [FIT_NOISE.within_log_sd, FIT_NOISE.shared_log_sd],
        "estimate": est.to_dict(),
        "rule_output": {
            "within_log_sd": round(est.within_log_sd, DECIMALS),
            "shared_log_sd": round(est.shared_log_sd, DECIMALS),
        },
        "shipped": {"within_log_sd": NOISE.within_log_sd, "shared_log_sd": NOISE.shared_log_sd},
        "seconds": time.perf_counter() - t0,
    }


def _ci(x: list[float]) -> str:
    return f"{x[0]:.3f}-{x[1]:.3f}"


def numbers(r: dict[str, Any]) -> str:
    e, (fw, fb) = r["estimate"], r["fit_pair"]
    out, shipped = r["rule_output"], r["shipped"]
    lines = [
        MARKER,
        "",
        f"Commit `{r['commit']}`, {r['date']}; {r['rows']} usable shared rows in "
        f"{len(r['campaign_rows'])} campaigns ("
        + ", ".join(f"{k} {n}" for k, n in r["campaign_rows"].items())
        + f"); {r['seconds']:.0f} s.",
        "",
        f"REML on the leave-one-source-out residuals of the fit weighted by the shipped fit pair "
        f"{fw} / {fb}: sigma_w {e['within_log_sd']:.4f} (95 % profile-likelihood CI "
        f"{_ci(e['within_ci'])}), sigma_b {e['shared_log_sd']:.4f} (CI {_ci(e['shared_ci'])}), "
        f"rho {e['rho']:.3f}, mean held-out log(measured / predicted) {e['mean_log']:+.4f} "
        f"(sd {e['mean_log_sd']:.4f}).",
        "",
        f"Rule output, rounded to {DECIMALS} decimals: sigma_w {out['within_log_sd']}, sigma_b "
        f"{out['shared_log_sd']}. Shipped prediction pair in "
        f"`planner/calibration/regularised.py`: sigma_w {shipped['within_log_sd']}, sigma_b "
        f"{shipped['shared_log_sd']}.",
        "",
        "sigma_b rests on "
        f"{e['campaigns'] - 1} between-campaign degrees of freedom: its interval above is the "
        "honest statement of how little four campaigns say about how far a new cluster's level "
        "sits from the model's.",
        "",
    ]
    return "\n".join(lines)


def write(r: dict[str, Any]) -> None:
    RESULTS.joinpath("noise.json").write_text(
        json.dumps(r, indent=1, default=float) + "\n", encoding="utf-8"
    )
    md = RESULTS.joinpath("noise.md")
    text = md.read_text(encoding="utf-8") if md.exists() else ""
    head = text.split(MARKER)[0].rstrip("\n")
    md.write_text((head + "\n\n" if head else "") + numbers(r), encoding="utf-8")


def main() -> None:
    r = run()
    write(r)
    print(numbers(r), file=sys.stdout)


if __name__ == "__main__":
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.noise",
        __doc__,
        writes="bench/results/noise.json and the numbers section of bench/results/noise.md",
        runtime="about 10 seconds",
    )
    parser.parse_args()
    main()
