"""Issue 12 "Done when", five-run bar: a user uploads five runs of a cluster and calibrates.

Run ``python -m bench.five_runs``. Writes ``bench/results/five_runs.json`` and ``five_runs.md``.

A *campaign* (one source x one GPU type: one measurement campaign on one cluster and software
stack) stands for a user's cluster. For each campaign with at least ``MIN_ROWS`` usable rows:

1. the starting profile is fitted WITHOUT the campaign's rows, by the same code as
   ``bench.accuracy``'s folds (``planner.calibration.fit._profile_for``, the regularised fit on
   the GPU type's other rows; the shipped profile is never used: it has seen these rows);
2. the user uploads ``UPLOAD`` rows of the campaign and calibrates through the code path of
   ``planner calibrate`` and ``POST /v1/clusters/{slug}/calibrations``
   (``app.calibration.honest.calibrate_gpu_rows``: regularised fit, honest CV, ``fit_decision``
   keeps the prior when the fit's CV is worse), with the starting profile as the prior;
3. the campaign's OTHER rows are scored: median and p90 |error| of tokens/s per GPU, and
   Spearman inside each sweep that keeps >= 3 scored rows; "before" = the starting profile on
   the same scored rows.

The five rows are chosen (a) at random, ``SEEDS`` seeds (also onto a harder start fitted on no
row of the campaign's GPU type, the profile an unmeasured GPU is shipped with), and (b) as
``--suggest 5`` proposes them for a representative plan of the campaign, each suggested run
mapped to the nearest measured row (suggest proposes short runs, mostly layer-reduced
proxies, that are not in the data). The report and the issue's scoreboard are in
:mod:`bench.five_runs_report`.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from app.calibration.honest import calibrate_gpu_rows
from bench.accuracy import RESULTS, _clean, coefficients_for, commit, data_path, load
from models_db.intervals import load_interval_table
from planner.calibration import fit as _fit
from planner.calibration.campaign_spread import estimate
from planner.calibration.level import new_cluster_noise
from planner.calibration.measurements import Measurement, read_rows
from planner.calibration.noise import NoiseModel
from planner.calibration.noise import campaign_key as noise_campaign_key
from planner.calibration.regularised import FIT_ROW_LOG_SD, FIT_SHARED_LOG_SD
from planner.calibration.suggest import MAX_NODES, SuggestedRun, suggest_runs
from planner.performance.profile import PerformanceProfile
from planner.performance.step_time import default_profile
from planner.specs import GPUSpec

MIN_ROWS = 8
"""Fewest usable rows a campaign needs: 5 uploaded plus >= 3 scored (one sweep's Spearman)."""
UPLOAD = 5
SEEDS = 20
CLEAN_SPREAD = 0.03
"""A sweep whose measured rows differ by less than this is ordered by run-to-run noise
(bench.accuracy's 'clean sweep' line)."""


def campaign_key(m: Measurement) -> str:
    return f"{m.source_id} x {m.cluster.gpu.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    """One simulated user: what the starting fit sees, what is uploaded, what is scored."""

    campaign: str
    start_rows: tuple[Measurement, ...]
    """Rows the starting profile is fitted on: every usable row outside the campaign."""
    uploaded: tuple[Measurement, ...]
    scored: tuple[Measurement, ...]
    """The campaign's rows that were not uploaded."""


def make_split(rows: Sequence[Measurement], campaign: str, uploaded_ids: Sequence[str]) -> Split:
    """The split for uploading ``uploaded_ids`` (row ids of ``campaign``'s rows)."""
    inside = [m for m in rows if campaign_key(m) == campaign]
    ids = set(uploaded_ids)
    unknown = ids - {m.row_id for m in inside}
    if unknown:
        raise ValueError(f"uploaded rows {sorted(unknown)} are not rows of campaign {campaign}")
    return Split(
        campaign=campaign,
        start_rows=tuple(m for m in rows if campaign_key(m) != campaign),
        uploaded=tuple(m for m in inside if m.row_id in ids),
        scored=tuple(m for m in inside if m.row_id not in ids),
    )


def campaigns(
    rows: Sequence[Measurement], raw: Sequence[dict[str, str]], skipped: dict[str, str]
) -> tuple[dict[str, list[Measurement]], dict[str, str]]:
    """Qualifying campaigns (>= MIN_ROWS usable rows), and why each other campaign does not."""
    by: dict[str, list[Measurement]] = {}
    for m in rows:
        by.setdefault(campaign_key(m), []).append(m)
    ok = {k: v for k, v in sorted(by.items()) if len(v) >= MIN_ROWS}
    why: dict[str, str] = {
        k: f"{len(v)} usable rows (< {MIN_ROWS})" for k, v in by.items() if k not in ok
    }
    # campaigns of the data file with no usable row at all: say what the loader skipped
    used_sources = {m.source_id for m in rows}
    for source in sorted({r["source_id"] for r in raw} - used_sources):
        reasons = Counter(skipped.get(r["row_id"], "?") for r in raw if r["source_id"] == source)
        gpus = sorted({r["gpu_type"] for r in raw if r["source_id"] == source})
        text = "; ".join(f"{n} x {reason}" for reason, n in reasons.most_common(3))
        why[f"{source} x {', '.join(gpus)}"] = f"0 usable rows ({text})"
    return ok, why


def starting_profile(gpu: GPUSpec, train: Sequence[Measurement]) -> PerformanceProfile:
    """The profile fitted without the campaign: bench.accuracy's fold code, verbatim."""
    return _fit._profile_for(
        gpu, train, default_profile, coefficients_for, FIT_ROW_LOG_SD, FIT_SHARED_LOG_SD
    )


def level_noise_without(campaign: Measurement) -> NoiseModel:
    """The level's prior for ``campaign``'s uploads: the shipped table's transfer spread with tau
    re-estimated without that campaign (``campaign_spread.estimate(leave_out=...)``, as
    ``bench.calibration``'s nested coverage does), so the simulated user's cluster never informs
    its own prior; the shipped prior where the table has no transfer block."""
    table = load_interval_table()
    spread = None if table is None else table.transfer
    key = noise_campaign_key(campaign)
    if spread is not None and any(c.campaign == key for c in spread.campaigns):
        spread = estimate(spread.campaigns, spread.within_log_sd, leave_out=key)
    return new_cluster_noise(spread)


def upload(
    uploaded: Sequence[Measurement], start: PerformanceProfile, *, fit_level: bool = True
) -> tuple[PerformanceProfile, dict[str, Any]]:
    """The user's calibration (planner calibrate / POST calibrations), starting from ``start``;
    ``fit_level=False``: the calibration as it was before the cluster's level."""
    return calibrate_gpu_rows(
        list(uploaded),
        start,
        group_by="sweep",
        fit_level=fit_level,
        level_noise=level_noise_without(uploaded[0]),
    )


def score(rows: Sequence[Measurement], profile: PerformanceProfile) -> dict[str, Any]:
    """Error of tokens/s per GPU and Spearman inside each sweep with >= 3 of ``rows``."""
    pred = _fit.predict_tokens_per_s(rows, profile)
    meas = np.array([m.tokens_per_s_per_gpu for m in rows], dtype=np.float64)
    stats = _fit.ErrorStats.of(pred, meas)
    sweeps = _fit._sweep_rankings(rows, pred)  # the accuracy bench's ranking code
    rhos = [s.spearman for s in sweeps if math.isfinite(s.spearman)]
    clean = [
        s.spearman
        for s in sweeps
        if math.isfinite(s.spearman) and s.measured_spread >= CLEAN_SPREAD
    ]
    return {
        "n": stats.n,
        "median_ape": stats.median_ape,
        "p90_ape": stats.p90_ape,
        "sweeps": {
            s.sweep_id: {"n": s.n, "spearman": s.spearman, "spread": s.measured_spread}
            for s in sweeps
        },
        "min_spearman": min(rhos) if rhos else None,
        "median_spearman": float(np.median(rhos)) if rhos else None,
        "min_spearman_clean": min(clean) if clean else None,
    }


def simulate(split: Split, start: PerformanceProfile, *, fit_level: bool = True) -> dict[str, Any]:
    """Upload ``split.uploaded`` onto ``start``; score before and after on ``split.scored``."""
    calibrated, report = upload(split.uploaded, start, fit_level=fit_level)
    return {
        "uploaded": [m.row_id for m in split.uploaded],
        "kept_prior": bool(report["decision"]["kept_prior"]),
        "choice": str(report["decision"]["choice"]),
        "level": report["level"],
        "decision": report["decision"]["reason"],
        "moved": list(report["moved"]),
        "before": score(split.scored, start),
        "after": score(split.scored, calibrated),
    }


def random_ids(group: Sequence[Measurement], seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(group), size=UPLOAD, replace=False)
    return [group[int(i)].row_id for i in sorted(pick)]


def representative(group: Sequence[Measurement]) -> Measurement:
    """The plan a user of this cluster asks about: the campaign's most measured (model,
    precision), at its largest GPU count (the production run; suggest proposes short ones)."""
    common = Counter((m.model.name, m.job.precision) for m in group).most_common(1)[0][0]
    same = [m for m in group if (m.model.name, m.job.precision) == common]
    return max(same, key=lambda m: m.cluster.num_gpus)


def _log2(a: float, b: float) -> float:
    return abs(math.log2(max(a, 1e-9) / max(b, 1e-9)))


def distance(run: SuggestedRun, m: Measurement) -> float:
    """How far a measured row is from a suggested run: octaves of each size and parallel degree,
    plus one per differing setting. The model counts by its width (twice: GEMM shapes follow
    it) and its layers per virtual pipeline stage, since suggest's proxies drop layers."""
    a, b = run.layout, m.layout
    sizes = (
        (run.model.hidden_size, m.model.hidden_size),
        (run.model.hidden_size, m.model.hidden_size),
        (run.model.num_layers / (a.pp * a.vpp), m.model.num_layers / (b.pp * b.vpp)),
        (run.cluster.num_gpus, m.cluster.num_gpus),
        (run.job.seq_length, m.job.seq_length),
        (a.tp, b.tp),
        (a.pp, b.pp),
        (a.vpp, b.vpp),
        (a.cp, b.cp),
        (a.ep, b.ep),
        (a.micro_batch_size, b.micro_batch_size),
    )
    flags = (
        run.model.is_moe != m.model.is_moe,
        run.job.precision != m.job.precision,
        a.recompute != b.recompute,
    )
    return sum(_log2(x, y) for x, y in sizes) + sum(flags)


def suggested_ids(
    group: Sequence[Measurement], start: PerformanceProfile
) -> tuple[list[str], dict[str, Any]]:
    """``--suggest 5`` for the campaign's representative plan, each run mapped to its nearest
    measured row of the campaign not yet taken."""
    plan = representative(group)
    # the prior sd of the cluster's offset: the level's, as `planner calibrate --suggest` passes
    # it (tau without the campaign, as its uploads use)
    noise = level_noise_without(plan)
    sugg = suggest_runs(
        plan.model, plan.cluster, plan.job, plan.layout, start, k=UPLOAD, noise=noise
    )
    taken: list[str] = []
    mapping = []
    for run in sugg.runs:
        free = [m for m in group if m.row_id not in taken]
        near = min(free, key=lambda m: distance(run, m))
        taken.append(near.row_id)
        mapping.append(
            {
                "suggested": run.change,
                "suggested_gpus": run.cluster.num_gpus,
                "variance_reduction": run.variance_reduction,
                "row": near.row_id,
                "row_layout": describe(near),
                "distance": distance(run, near),
            }
        )
    # fewer suggestions than UPLOAD (few feasible candidates): fill with the nearest to the plan
    while len(taken) < min(UPLOAD, len(group)):
        free = [m for m in group if m.row_id not in taken]
        near = min(free, key=lambda m: _layout_gap(plan, m))
        taken.append(near.row_id)
        mapping.append(
            {
                "suggested": "(none: nearest to the plan)",
                "row": near.row_id,
                "row_layout": describe(near),
            }
        )
    lay = plan.layout
    info = {
        "plan_row": plan.row_id,
        "plan": f"{describe(plan)}, {plan.job.precision}",
        "suggested": len(sugg.runs),
        "plan_model_parallel_gpus": lay.tp * lay.pp * lay.cp,
        "max_nodes": MAX_NODES,
        "candidates": sugg.candidates,
        "plan_uncertainty_pct_before": 100 * float(np.expm1(sugg.plan_sd_before)),
        "plan_uncertainty_pct_after": 100 * float(np.expm1(sugg.plan_sd_after)),
        "mapping": mapping,
    }
    return taken, info


def describe(m: Measurement) -> str:
    lay = m.layout
    return (
        f"{m.model.name}, {m.cluster.num_gpus} GPUs, tp{lay.tp} pp{lay.pp} vpp{lay.vpp} "
        f"cp{lay.cp} ep{lay.ep} mbs{lay.micro_batch_size}"
    )


def _layout_gap(plan: Measurement, m: Measurement) -> float:
    return _log2(plan.cluster.num_gpus, m.cluster.num_gpus) + float(plan.model != m.model)


def _spread(values: Sequence[float | None]) -> dict[str, float | None]:
    """Median and the range over seeds (None where no seed had a figure)."""
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": float(np.median(xs)), "min": min(xs), "max": max(xs), "n": len(xs)}


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The random-upload runs over seeds: median and range of each figure."""
    out: dict[str, Any] = {"seeds": len(runs)}
    for when in ("before", "after"):
        for key in (
            "median_ape",
            "p90_ape",
            "min_spearman",
            "median_spearman",
            "min_spearman_clean",
        ):
            out[f"{when}_{key}"] = _spread([r[when][key] for r in runs])
    pairs = [s["spearman"] for r in runs for s in r["after"]["sweeps"].values()]
    finite = [p for p in pairs if math.isfinite(p)]
    out["after_sweep_rhos_at_least_0.8"] = sum(p >= 0.8 for p in finite)
    out["after_sweep_rhos"] = len(finite)
    out["kept_prior"] = sum(r["kept_prior"] for r in runs)
    out["seeds_moved"] = sum(bool(r["moved"]) for r in runs)
    out["choices"] = {c: sum(r["choice"] == c for r in runs) for c in ("fit", "level", "prior")}
    out["level_step_scale"] = _spread([r["level"]["cluster_step_scale"] for r in runs])
    gain = [r["after"]["median_ape"] - r["before"]["median_ape"] for r in runs]
    out["median_better"] = sum(g < -1e-9 for g in gain)
    out["median_worse"] = sum(g > 1e-9 for g in gain)
    out["moved"] = dict(Counter(c for r in runs for c in r["moved"]).most_common())
    return out


def campaign_result(
    rows: Sequence[Measurement], key: str, group: Sequence[Measurement]
) -> dict[str, Any]:
    """One campaign as a user's cluster: the starting fit without it, then the uploads."""
    gpu = group[0].cluster.gpu
    train = make_split(rows, key, []).start_rows
    start = starting_profile(gpu, train)
    runs = [simulate(make_split(rows, key, random_ids(group, s)), start) for s in range(SEEDS)]
    ids, info = suggested_ids(group, start)
    # a harder start, nearer a cluster the fit never saw: no row of the GPU type at all (its
    # profile is the transfer an unmeasured GPU is shipped with), the same uploads
    foreign = [m for m in train if m.cluster.gpu.name != gpu.name]
    hard = starting_profile(gpu, foreign)
    hard_runs = [simulate(make_split(rows, key, random_ids(group, s)), hard) for s in range(SEEDS)]
    # the same uploads calibrated without the cluster's level: the calibration before it
    old = [
        simulate(make_split(rows, key, random_ids(group, s)), st, fit_level=False)
        for st in (start, hard)
        for s in range(SEEDS)
    ]
    return {
        "rows": len(group),
        "sweeps": dict(Counter(m.sweep_id or "(no sweep id)" for m in group)),
        "start_fit_rows": sum(m.cluster.gpu.name == gpu.name for m in train),
        "random": summarise(runs),
        "random_runs": runs,
        "random_gpu_out": summarise(hard_runs),
        "random_no_level": summarise(old[:SEEDS]),
        "random_gpu_out_no_level": summarise(old[SEEDS:]),
        "gpu_out_start": str(hard.provenance.get("kind", "?")),
        "level_prior_log_sd": level_noise_without(group[0]).shared_log_sd,
        "suggest": {**info, **simulate(make_split(rows, key, ids), start)},
    }


def run() -> dict[str, Any]:
    t0 = time.perf_counter()
    measurements, skipped = load()
    rows = _fit.usable(measurements)
    raw = read_rows(data_path())
    ok, excluded = campaigns(rows, raw, {s.row_id: s.reason for s in skipped})
    result: dict[str, Any] = {
        "commit": commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rows_used": len(rows),
        "upload": UPLOAD,
        "seeds": SEEDS,
        "min_rows": MIN_ROWS,
        "excluded": excluded,
        "campaigns": {},
    }
    for key, group in ok.items():
        result["campaigns"][key] = campaign_result(rows, key, group)
    result["run_time_s"] = round(time.perf_counter() - t0, 1)
    return result


def main() -> int:
    from bench.five_runs_report import markdown, scoreboard

    res = run()
    res["scoreboard"] = scoreboard(res)
    res = _clean(res)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "five_runs.json").write_text(json.dumps(res, indent=1) + "\n")
    md = markdown(res)
    (RESULTS / "five_runs.md").write_text(md)
    sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.five_runs",
        __doc__,
        writes="bench/results/five_runs.{json,md}",
        runtime="several minutes on two cores (over 15 on a busy machine)",
    )
    parser.parse_args()
    raise SystemExit(main())
