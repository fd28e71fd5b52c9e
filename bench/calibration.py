"""Honest calibration, prediction intervals and their coverage (issue 12 items 8 and 9).

Run ``python -m bench.calibration``. It

* builds the interval table ``models_db/intervals/throughput.json`` from held-out residuals:
  leave-one-source-out for the fitted GPUs, leave-one-GPU-type-out for transferred profiles
  (never in-sample residuals), with the calibrated ranges a plan is checked against;
* checks the bands' coverage per regime, both on the rows the table was built from and nested
  (each source's rows against a table built without that source);
* compares the regularised calibration with the earlier free fit on the shared rows: time,
  cross-validated error and its spread per GPU type, and the "two bf16 rows" demonstration;

and writes ``bench/results/calibration.json`` and ``calibration.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.accuracy import coefficients_for, commit, data_path, load
from bench.published_bands_spread import (
    published_offsets,
    shared_nested,
    shared_offsets,
    transfer_markdown,
)
from models_db.profiles import load_profile
from planner.calibration.campaign_spread import estimate
from planner.calibration.fit import (
    ErrorStats,
    cross_validate,
    fit_profile,
    predict_tokens_per_s,
    usable,
)
from planner.calibration.honest_cv import cross_validate_prepared
from planner.calibration.interval_bands import BandRule, build_bands
from planner.calibration.intervals import (
    REGIME_PARTS,
    TRANSFERRED,
    IntervalTable,
    regime_parts,
    stack_values,
)
from planner.calibration.measurements import Measurement
from planner.calibration.noise import NoiseModel, campaign_key
from planner.calibration.regularised import (
    FIT_NOISE,
    FIT_ROW_LOG_SD,
    NOISE,
    fit_prepared,
    fit_regularised,
    prepare,
)
from planner.calibration.variance_components import reml
from planner.model.params import param_counts
from planner.performance.step_time import default_profile

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TABLE = ROOT / "models_db" / "intervals" / "throughput.json"
LOW_Q, HIGH_Q = 0.10, 0.90
MIN_ROWS = 10
"""Fewest effective held-out rows a regime needs for its own band (else its parent's): with 10
rows the 10th and 90th percentiles are each pinned by about one row; rows of one campaign count
by the design effect (planner.calibration.interval_bands), so one campaign never suffices."""


def _parts(m: Measurement) -> list[str]:
    return regime_parts(m.model, m.cluster, m.job, m.layout.cp)


Noise = tuple[NoiseModel, int]
"""A noise model and the degrees of freedom of its estimate (campaigns - 1)."""
SHIPPED: Noise = (NOISE, 3)
"""The shipped pair rests on the shared rows' 4 campaigns (bench/results/noise.md)."""


def _bands(
    parts: list[list[str]],
    ratios: np.ndarray,
    rows: list[Measurement],
    rule: BandRule,
    noise: Noise = SHIPPED,
) -> dict[str, dict[str, Any]]:
    return build_bands(
        parts,
        ratios,
        [campaign_key(m) for m in rows],
        noise=noise[0],
        low_q=LOW_Q,
        high_q=HIGH_Q,
        rule=rule,
        df=noise[1],
    )


def bands_of(
    rows: list[Measurement],
    ratios: np.ndarray,
    rule: BandRule = "model",
    noise: Noise = SHIPPED,
) -> dict[str, dict[str, Any]]:
    """Bands of measured / predicted for every regime key and every parent of it, with the
    campaigns and effective rows behind each (planner.calibration.interval_bands); ``rule``:
    the noise model's predictive band (shipped) or the earlier split-conformal ranks."""
    return _bands([_parts(m) for m in rows], ratios, rows, rule, noise)


def noise_of(rows: list[Measurement], ratios: np.ndarray) -> Noise:
    """REML noise of these held-out ratios (bench/results/noise.md's estimator), with its df."""
    est = reml(np.log(ratios), [campaign_key(m) for m in rows], intervals=False)
    return est.noise, est.campaigns - 1


def calibrated_range(rows: list[Measurement]) -> dict[str, Any]:
    params = [float(param_counts(m.model).total) for m in rows]
    moe = [m.model for m in rows if m.model.is_moe]
    cps = [m.layout.cp for m in rows]
    return {
        "gpus": sorted({m.cluster.gpu.name for m in rows}),
        "parameters": [min(params), max(params)],
        "seq_length": [min(m.job.seq_length for m in rows), max(m.job.seq_length for m in rows)],
        "num_gpus": [min(m.cluster.num_gpus for m in rows), max(m.cluster.num_gpus for m in rows)],
        "max_experts": max((x.num_experts or 0 for x in moe), default=0),
        "max_topk": max((x.moe_router_topk for x in moe), default=0),
        "min_expert_ffn_ratio": min(
            (x.expert_ffn_hidden_size / x.hidden_size for x in moe), default=float("inf")
        ),
        "max_cp": max(cps),
        "cp_across_nodes": any(
            m.layout.cp > 1 and m.layout.tp * m.layout.cp > m.cluster.gpus_per_node for m in rows
        ),
        "stack": _stack_range(rows),
    }


def _stack_range(rows: list[Measurement]) -> dict[str, list[str]]:
    """Each stack setting's values among the rows (a plan with another value extrapolates)."""
    seen: dict[str, set[str]] = {}
    for m in rows:
        for name, value in stack_values(m.model, m.cluster, m.job, m.layout).items():
            seen.setdefault(name, set()).add(value)
    return {name: sorted(values) for name, values in seen.items()}


def coverage(table: IntervalTable, rows: list[Measurement], ratios: np.ndarray) -> dict[str, Any]:
    """Share of rows whose measured / predicted lies in their regime's band, per regime, and the
    median width (high - low) of the bands the rows got."""
    hits: dict[str, list[bool]] = {}
    widths = []
    for m, r in zip(rows, ratios, strict=True):
        _, band = table.band(_parts(m))
        inside = band.low <= r <= band.high
        widths.append(band.high - band.low)
        hits.setdefault("all", []).append(inside)
        hits.setdefault("/".join(_parts(m)), []).append(inside)
    out = {k: {"n": len(v), "inside": float(np.mean(v))} for k, v in sorted(hits.items())}
    out["all"]["median_width"] = float(np.median(widths))
    return out


def nested_coverage(
    data: dict[str, Any],
    rows: list[Measurement],
    ratio: np.ndarray,
    *,
    rule: BandRule = "model",
) -> dict[str, Any]:
    """Each source's rows against a table built without that source: per regime, per held-out
    source, and the median width of the bands the held-out rows got. The model band's noise is
    re-estimated (REML) on the other sources' ratios, so nothing of the held-out source enters
    its band; the conformal bands use the shipped noise for their effective rows."""
    nested: dict[str, list[bool]] = {}
    per_source: dict[str, dict[str, Any]] = {}
    widths = []
    for source in sorted({m.source_id for m in rows}):
        train = [i for i, m in enumerate(rows) if m.source_id != source]
        train_rows = [rows[i] for i in train]
        noise = noise_of(train_rows, ratio[train]) if rule == "model" else SHIPPED
        bands = bands_of(train_rows, ratio[train], rule, noise)
        sub = IntervalTable.from_dict({**data, "bands": bands})
        hits: list[bool] = []
        used: Counter[str] = Counter()
        for i, m in enumerate(rows):
            if m.source_id == source:
                key, band = sub.band(_parts(m))
                inside = band.low <= ratio[i] <= band.high
                hits.append(inside)
                used[key] += 1
                widths.append(band.high - band.low)
                nested.setdefault("all", []).append(inside)
                nested.setdefault("/".join(_parts(m)), []).append(inside)
        held = ratio[[i for i, m in enumerate(rows) if m.source_id == source]]
        per_source[source] = {
            "n": len(hits),
            "inside": float(np.mean(hits)),
            "bands": dict(used),
            "ratio_median": float(np.median(held)),
            "ratio_range": [float(held.min()), float(held.max())],
            "noise": [noise[0].within_log_sd, noise[0].shared_log_sd, noise[1]],
        }
    out = {k: {"n": len(v), "inside": float(np.mean(v))} for k, v in sorted(nested.items())}
    out["all"]["median_width"] = float(np.median(widths))
    return {"regimes": out, "sources": per_source}


def _ratios(predictions: dict[str, dict[str, float]], rows: list[Measurement]) -> np.ndarray:
    """Measured / held-out predicted tokens/s of each row."""
    return np.array(
        [predictions[m.row_id]["measured"] / predictions[m.row_id]["after"] for m in rows]
    )


def noise_summary(rows: list[Measurement]) -> dict[str, Any]:
    """The shipped fit weighting (the ridge's pair, chosen by bench/results/fit_weighting.md) and
    what each campaign's rows count as in the fit under it; the prediction pair beside it."""
    return {
        "within_log_sd": FIT_NOISE.within_log_sd,
        "shared_log_sd": FIT_NOISE.shared_log_sd,
        "rho": FIT_NOISE.rho,
        "prediction": {
            "within_log_sd": NOISE.within_log_sd,
            "shared_log_sd": NOISE.shared_log_sd,
            "rho": NOISE.rho,
        },
        "effective_rows": {
            c: {"rows": n, "effective": FIT_NOISE.effective_rows(n)}
            for c, n in sorted(Counter(campaign_key(m) for m in rows).items())
        },
    }


def _transferred_band(
    rows: list[Measurement], ratio_gpu: np.ndarray, rule: BandRule
) -> dict[str, Any]:
    """One band over every row's leave-one-GPU-type-out residual, with its campaigns and
    effective rows recorded like the others; the model band with that procedure's own REML
    noise."""
    noise = noise_of(rows, ratio_gpu) if rule == "model" else SHIPPED
    return _bands([[] for _ in rows], ratio_gpu, rows, rule, noise)["all"]


def _widths(bands: dict[str, dict[str, Any]]) -> dict[str, float]:
    return {k: b["high"] - b["low"] for k, b in bands.items()}


def interval_table(rows: list[Measurement], code: str) -> tuple[dict[str, Any], dict[str, Any]]:
    t0 = time.perf_counter()
    loso = cross_validate(
        rows, default_profile, group_by="source", coefficients_for=coefficients_for
    )
    logo = cross_validate(rows, default_profile, group_by="gpu", coefficients_for=coefficients_for)
    ratio = _ratios(loso.predictions, rows)
    ratio_gpu = _ratios(logo.predictions, rows)
    bands = bands_of(rows, ratio)
    bands[TRANSFERRED] = _transferred_band(rows, ratio_gpu, "model")
    before = bands_of(rows, ratio, "conformal-effective")
    before[TRANSFERRED] = _transferred_band(rows, ratio_gpu, "conformal-effective")
    data = {
        "low_quantile": LOW_Q,
        "high_quantile": HIGH_Q,
        "min_rows": MIN_ROWS,
        "bands": bands,
        "calibrated": calibrated_range(rows),
        "source": {
            "generated_by": "bench/calibration.py",
            "commit": code,
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "residuals": "measured / predicted tokens/s per GPU, leave-one-source-out CV "
            f"({len(rows)} rows of {data_path().name}); '{TRANSFERRED}': leave-one-GPU-type-out",
            "regime_parts": list(REGIME_PARTS),
            "min_rows_counts": "effective rows: rows of one campaign (source x GPU type) by the "
            f"design effect, rho {NOISE.rho:.2f} (planner/calibration/interval_bands.py)",
            "band": "the campaign noise model's predictive band: exp(mu + t_q(df) s), mu the "
            "regime's GLS mean log ratio, s = sqrt(sigma_w^2 + sigma_b^2 + Var(mu)), sigma_w "
            f"{NOISE.within_log_sd}, sigma_b {NOISE.shared_log_sd}, df {SHIPPED[1]} "
            "(planner/calibration/interval_bands.py; rule: bench/results/noise.md)",
        },
    }
    table = IntervalTable.from_dict(data)
    plain = IntervalTable.from_dict({**data, "bands": before})
    # the between-campaign spread of a new campaign (planner.calibration.campaign_spread)
    published, fitted = published_results(), {(m.source_id, m.cluster.gpu.name) for m in rows}
    offsets = shared_offsets(table, rows, ratio) + published_offsets(published, table.bands, fitted)
    data["transfer"] = estimate(offsets, NOISE.within_log_sd).to_dict()

    def _inside(b: dict[str, Any]) -> float:
        return float(np.mean((ratio_gpu >= b["low"]) & (ratio_gpu <= b["high"])))

    nested = nested_coverage(data, rows, ratio)
    nested_plain = nested_coverage(data, rows, ratio, rule="conformal-effective")

    def build(train: list[int]) -> tuple[dict[str, Any], float]:
        sub = [rows[i] for i in train]  # as nested_coverage: nothing of the held-out source
        noise = noise_of(sub, ratio[train])
        out = bands_of(sub, ratio[train], "model", noise)
        out[TRANSFERRED] = _transferred_band(sub, ratio_gpu[train], "model")
        return out, noise[0].within_log_sd

    nested_new = shared_nested(data, rows, ratio, build, published, fitted)
    report = {
        "seconds": time.perf_counter() - t0,
        "loso_after": {"median_ape": loso.after.median_ape, "p90_ape": loso.after.p90_ape},
        "coverage_on_table_rows": coverage(table, rows, ratio),
        "coverage_nested_by_source": nested["regimes"],
        "nested_by_held_out_source": nested["sources"],
        "band_widths": _widths(bands),
        "before_rule": {  # the earlier rule (conformal ranks on effective rows), same residuals
            "coverage_on_table_rows": coverage(plain, rows, ratio),
            "coverage_nested_by_source": nested_plain["regimes"],
            "nested_by_held_out_source": nested_plain["sources"],
            "band_widths": _widths(before),
            "transferred_coverage": _inside(before[TRANSFERRED]),
        },
        "transferred_coverage": _inside(bands[TRANSFERRED]),
        "new_campaign_rule": {  # the band a response shows: tau for a campaign never fitted
            "transfer": data["transfer"],
            "coverage_nested_by_source": nested_new["all"],
            "nested_by_held_out_source": nested_new["sources"],
            "published_results": PUBLISHED.name if PUBLISHED.exists() else None,
        },
    }
    return data, report


PUBLISHED = RESULTS / "published_check.json"
"""The published check's cases (point predictions never fitted on them): only tau reads them."""


def published_results() -> list[dict[str, Any]]:
    if not PUBLISHED.exists():
        return []
    return list(json.loads(PUBLISHED.read_text(encoding="utf-8"))["results"])


def _free_fit_cv(rows: list[Measurement], prior: Any) -> tuple[ErrorStats, int]:
    """The earlier calibration's CV: a free least-squares fit per held-out sweep."""
    keys = [m.sweep_id or m.row_id for m in rows]
    measured = np.array([m.tokens_per_s_per_gpu for m in rows], dtype=np.float64)
    after = np.empty(len(rows))
    for key in sorted(set(keys)):
        held = [i for i, k in enumerate(keys) if k == key]
        fitted, _ = fit_profile([m for m, k in zip(rows, keys, strict=True) if k != key], prior)
        after[held] = predict_tokens_per_s([rows[i] for i in held], fitted)
    return ErrorStats.of(after, measured), len(set(keys))


def old_vs_new(rows: list[Measurement]) -> dict[str, Any]:
    """Per GPU type: the earlier calibration (free fit, leave-one-sweep-out refits) against the
    regularised one, both on the shipped profile as the prior, both timed."""
    out: dict[str, Any] = {}
    for gpu_name in sorted({m.cluster.gpu.name for m in rows}):
        sub = [m for m in rows if m.cluster.gpu.name == gpu_name]
        prior = load_profile(sub[0].cluster.gpu)
        t0 = time.perf_counter()
        fit_profile(sub, prior)
        old = _free_fit_cv(sub, prior)  # cross_validate now runs the regularised fit
        t_old = time.perf_counter() - t0
        t0 = time.perf_counter()
        prepared = prepare(sub, prior)
        new_fit = fit_prepared(prepared)
        cv = cross_validate_prepared(
            prepared, [m.sweep_id or m.row_id for m in prepared.rows], group_name="sweep"
        )
        t_new = time.perf_counter() - t0
        assert cv is not None
        folds = [x for x in cv.fold_median_ape if np.isfinite(x)]
        out[gpu_name] = {
            "rows": len(sub),
            "old": {
                "seconds": t_old,
                "median_ape": old[0].median_ape,
                "p90_ape": old[0].p90_ape,
                "folds": old[1],
            },
            "new": {
                "seconds": t_new,
                "median_ape": cv.after.median_ape,
                "p90_ape": cv.after.p90_ape,
                "method": cv.method,
                "fold_median_range": [min(folds), max(folds)],
                "moved": [c.name for c in new_fit.moved],
                "kept": [c.name for c in new_fit.coefficients if not c.identified],
            },
            "before_median_ape": cv.before.median_ape,
        }
    return out


def two_bf16_rows(rows: list[Measurement]) -> dict[str, Any]:
    """Two bf16 rows of one H100 sweep: which coefficients each calibration moves."""
    pick = [m for m in rows if m.sweep_id == "dgxc_llama_8b_bf16_weak_scaling"][:2]
    prior = load_profile(pick[0].cluster.gpu)
    new = fit_regularised(pick, prior)
    old_profile, _ = fit_profile(pick, prior)
    return {
        "rows": [m.row_id for m in pick],
        "coefficients": [
            {
                "name": c.name,
                "prior": c.prior,
                "regularised": c.fitted,
                "free_fit": float(getattr(old_profile, c.name)),
                "identified": c.identified,
                "information": c.information,
            }
            for c in new.coefficients
        ],
    }


def cli_seconds() -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "calibrate",
            "--measurements",
            str(data_path()),
            "--json",
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    return time.perf_counter() - t0


def run(*, intervals_only: bool = False) -> dict[str, Any]:
    """``intervals_only``: rebuild the interval table and its coverage, and keep the
    calibration comparison (free fit vs regularised, minutes of the old fit) of the previous
    ``calibration.json``, saying which commit it is from."""
    code = commit()  # before this run writes its outputs (they would make it "-dirty")
    rows = usable(load()[0])
    table, intervals = interval_table(rows, code)
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    base = {
        "commit": code,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rows_used": len(rows),
        "rows_by_regime": dict(Counter("/".join(_parts(m)) for m in rows)),
        "noise_log_sd": FIT_ROW_LOG_SD,
        "noise": noise_summary(rows),
        "intervals": intervals,
        "table": table,
    }
    if intervals_only:
        old = json.loads(RESULTS.joinpath("calibration.json").read_text(encoding="utf-8"))
        keep = ("calibration", "two_bf16_rows", "cli_seconds")
        return {
            **base,
            **{k: old[k] for k in keep},
            "comparison_from": old.get("comparison_from", old["commit"]),
        }
    return {
        **base,
        "calibration": old_vs_new(rows),
        "two_bf16_rows": two_bf16_rows(rows),
        "cli_seconds": cli_seconds(),
    }


def _p(x: float) -> str:
    return f"{100 * x:.1f} %"


def markdown(r: dict[str, Any]) -> str:
    iv, cal = r["intervals"], r["calibration"]
    lines = [
        "# Honest calibration and prediction intervals",
        "",
        f"Commit `{r['commit']}`, {r['date']}. `python -m bench.calibration`; "
        f"{r['rows_used']} usable rows of the shared measurements."
        + (
            f" The calibration comparison and the two-rows table are those of commit "
            f"`{r['comparison_from']}` (`--intervals-only`: only the interval table and its "
            "coverage were rebuilt here)."
            if "comparison_from" in r
            else ""
        ),
        "",
        "## `planner calibrate` on the shared data",
        "",
        "Per GPU type, in this process, the earlier calibration (free least-squares fit of "
        "every coefficient, then one refit per held-out sweep) against the regularised one "
        "(one Jacobian at the prior shared by the fit and every fold); both timed in the same "
        "run, so under the same machine load:",
        "",
        "| GPU | rows | before: free fit, leave-one-sweep-out | s | CV median / p90 | "
        "now: regularised, identified only | s | CV median / p90 | fold medians min-max |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for gpu, c in cal.items():
        o, n = c["old"], c["new"]
        lines.append(
            f"| {gpu} | {c['rows']} | {o['folds']} folds | {o['seconds']:.1f} | "
            f"{_p(o['median_ape'])} / {_p(o['p90_ape'])} | {n['method']} | {n['seconds']:.1f} | "
            f"{_p(n['median_ape'])} / {_p(n['p90_ape'])} | "
            f"{_p(n['fold_median_range'][0])}-{_p(n['fold_median_range'][1])} |"
        )
    t_old = sum(c["old"]["seconds"] for c in cal.values())
    t_new = sum(c["new"]["seconds"] for c in cal.values())
    lines += [
        "",
        f"Together {t_old:.0f} s before, {t_new:.1f} s now ({t_old / t_new:.0f}x faster). The "
        f"whole command (`planner calibrate --measurements measured-throughput.csv --json`, "
        f"parse + both GPU types + CV, process start included) took {r['cli_seconds']:.1f} s in "
        "this run; on a quieter machine it was 96.8 s at commit 24ad1f5 (before) and 14-19 s "
        "after (`time`, 2 shared cores). The command now shows a progress bar, a short summary "
        "and lists the skipped rows only with `--show-skipped`.",
        "",
        "Coefficients the regularised calibration moved / kept at the prior:",
        "",
    ]
    for gpu, c in cal.items():
        n = c["new"]
        lines.append(
            f"- {gpu}: moved {', '.join(n['moved']) or 'none'}; "
            f"kept {', '.join(n['kept']) or 'none'}"
        )
    lines += [
        "",
        "The prior is the shipped profile, itself fitted on these rows, so both CV columns are "
        "flattering here; on a user's own rows the prior has not seen them. The row noise the "
        f"ridge assumes is {r['noise_log_sd']} in log error within a campaign, plus a shared "
        "per-campaign component (next section; `planner/calibration/regularised.py`).",
        "",
        "## Two bf16 rows",
        "",
        f"Rows {', '.join(r['two_bf16_rows']['rows'])} (Llama 3.1 8B, bf16, H100) against the "
        "shipped H100 profile:",
        "",
        "| coefficient | prior | regularised | free fit (before) | identified | information |",
        "|---|---|---|---|---|---|",
    ]
    for c in r["two_bf16_rows"]["coefficients"]:
        lines.append(
            f"| `{c['name']}` | {c['prior']:.4g} | {c['regularised']:.4g} | "
            f"{c['free_fit']:.4g} | {c['identified']} | {c['information']:.2f} |"
        )
    nz = r["noise"]
    lines += [
        "",
        "## Row noise: a shared per-campaign component",
        "",
        "The regularised fit weighs a row of a campaign of n rows by 1 / (1 + (n - 1) rho) "
        "(`planner/calibration/noise.py`) with the fit weighting, a ridge hyperparameter "
        "(m x the REML pair, m chosen by leave-one-source-out, reported by nested "
        "cross-validation: `bench/results/fit_weighting.md`): sigma_w "
        f"{nz['within_log_sd']}, sigma_b {nz['shared_log_sd']}, rho {nz['rho']:.3f}. The bands "
        "below use the prediction noise instead (REML on the shipped fit's leave-one-source-out "
        "residuals, `bench/results/noise.md`): sigma_w "
        f"{nz['prediction']['within_log_sd']}, sigma_b {nz['prediction']['shared_log_sd']}. "
        "Rows and what they count as in the fit:",
        "",
        "| campaign | rows | effective rows |",
        "|---|---|---|",
    ]
    for camp, c in nz["effective_rows"].items():
        lines.append(f"| {camp} | {c['rows']} | {c['effective']:.1f} |")
    lines += [
        "",
        "## Prediction intervals (80 % bands of measured / predicted)",
        "",
        "Bands from leave-one-source-out residuals per regime "
        "(`models_db/intervals/throughput.json`); a regime with fewer than "
        f"{r['table']['min_rows']} *effective* rows uses its parent: rows of one campaign "
        "(a source on one GPU type) share errors, so they count by the design effect "
        f"under the prediction noise (rho {r['noise']['prediction']['rho']:.2f}; one campaign "
        f"is worth at most {1 / r['noise']['prediction']['rho']:.1f} rows). Transferred GPU "
        "profiles use the "
        "leave-one-GPU-type-out band.",
        "",
        "*Now*: the campaign noise model's predictive band (rule fixed before measuring, "
        "`bench/results/noise.md`; `planner/calibration/interval_bands.py`): "
        "exp(mu_r +/- t_0.9(df) s), mu_r the regime's GLS mean log ratio, "
        "s = sqrt(sigma_w^2 + sigma_b^2 + Var(mu_r)), df = campaigns of the noise estimate - 1 "
        "(3 for the table; nested: REML on the other sources' residuals, df 2). *Before*: the "
        "split-conformal ranks with n the effective rows (the previous rule), same residuals "
        "and the same shipped noise for the effective rows.",
        "",
        "| regime | rows | campaigns | effective rows | own band | low | high | "
        "width before | width now |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    before = iv["before_rule"]
    for key, b in r["table"]["bands"].items():
        eff = b.get("effective_rows", b["n"])
        own = "yes" if eff >= r["table"]["min_rows"] or key == "all" else "parent's"
        lines.append(
            f"| {key} | {b['n']} | {b.get('campaigns', '-')} | {eff} | {own} | "
            f"{b['low']:.3f} | {b['high']:.3f} | {before['band_widths'][key]:.3f} | "
            f"{iv['band_widths'][key]:.3f} |"
        )
    lines += [
        "",
        "Coverage (share of held-out rows inside their band; the target is 80 %). *Table rows*: "
        "the rows the table was built from; *nested*: each source's rows against a table built "
        "without that source (the honest figure). *Before*: the same residuals with the "
        "split-conformal ranks on the effective rows.",
        "",
        "| regime | rows | on table rows (before) | on table rows | nested (before) | nested |",
        "|---|---|---|---|---|---|",
    ]
    nested = iv["coverage_nested_by_source"]
    for key, c in iv["coverage_on_table_rows"].items():
        ns = nested.get(key, {"inside": float("nan")})
        bt = before["coverage_on_table_rows"].get(key, {"inside": float("nan")})
        bn = before["coverage_nested_by_source"].get(key, {"inside": float("nan")})
        lines.append(
            f"| {key} | {c['n']} | {_p(bt['inside'])} | {_p(c['inside'])} | "
            f"{_p(bn['inside'])} | {_p(ns['inside'])} |"
        )
    lines += [
        "",
        "Median band width (high - low of measured / predicted) over the rows: on the table "
        f"{before['coverage_on_table_rows']['all']['median_width']:.3f} before, "
        f"{iv['coverage_on_table_rows']['all']['median_width']:.3f} now; nested "
        f"{before['coverage_nested_by_source']['all']['median_width']:.3f} before, "
        f"{nested['all']['median_width']:.3f} now.",
        "",
        "Nested coverage per held-out source (the band each of its rows fell back to), with "
        "the source's own held-out measured / predicted: a source whose rows share a shift "
        "(its median away from 1) or a trend across its rows is missed by a band of the other "
        "sources however the quantile is taken:",
        "",
        "| held-out source | rows | before | now | bands used now | median ratio | range |",
        "|---|---|---|---|---|---|---|",
    ]
    for src, c in iv["nested_by_held_out_source"].items():
        b = before["nested_by_held_out_source"][src]
        used = ", ".join(f"{k} x{n}" for k, n in c["bands"].items())
        lo, hi = c["ratio_range"]
        lines.append(
            f"| {src} | {c['n']} | {_p(b['inside'])} | {_p(c['inside'])} | {used} | "
            f"{c['ratio_median']:.3f} | {lo:.3f}-{hi:.3f} |"
        )
    lines += [
        "",
        f"Transferred-profile band on the leave-one-GPU-type-out residuals: "
        f"{_p(before['transferred_coverage'])} inside before, "
        f"{_p(iv['transferred_coverage'])} now.",
        "",
        *transfer_markdown(iv),
        f"Calibrated range (a plan outside it says so under `extrapolation`): "
        f"`{json.dumps(r['table']['calibrated'])}`",
        "",
    ]
    return "\n".join(lines)


def main(*, intervals_only: bool = False) -> None:
    result = run(intervals_only=intervals_only)
    RESULTS.joinpath("calibration.json").write_text(
        json.dumps(result, indent=1, default=float) + "\n", encoding="utf-8"
    )
    RESULTS.joinpath("calibration.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))


if __name__ == "__main__":
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.calibration",
        __doc__,
        writes="models_db/intervals/throughput.json, bench/results/calibration.{json,md}",
        runtime="about 4 minutes on two cores (the old free fit it compares with is most of it);"
        " --intervals-only about half a minute",
    )
    parser.add_argument(
        "--intervals-only",
        action="store_true",
        help="rebuild the interval table and its coverage only; keep the previous run's "
        "free-fit vs regularised comparison (the minutes-long part)",
    )
    main(intervals_only=parser.parse_args().intervals_only)
