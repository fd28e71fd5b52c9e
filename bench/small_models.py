"""Issue 12: why small models were over-predicted on runs never fitted. Each term's share of the
step for the small-model rows of the shared data (all sources) and the Megatron-LM README rows,
and how the predicted/measured ratio trends with the hidden size h.

Run ``python -m bench.small_models [--before OLD_accuracy.json]`` after ``bench.accuracy``: the
leave-one-source-out predictions of ``bench/results/accuracy.json`` are *after*; those of
``--before`` (an accuracy run of the code before the change) are *before*, kept in
``bench/results/small_models.json`` for later runs. The shares use the shipped profiles
(``models_db/profiles``) and the model as it is now; candidate mechanisms that the model does
not price are sized from the facts sheets in their own columns (never added to the step).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from bench.accuracy import RESULTS, commit, load
from bench.noise_text import fill
from bench.published_check import csv_cases
from models_db.profiles import load_profile
from planner.calibration.fit import usable
from planner.layouts import LayoutBatch
from planner.performance.compute import (
    elementwise_bytes_per_token,
    gemms_time,
    logits_time,
    loss_time,
    unfused_scores_time,
)
from planner.performance.context import step_context
from planner.performance.step_time import estimate_performance
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob

SMALL_H = 4096  # "small": h <= 4096 (the over-predicted rows have h 2304-4096)
KERNEL_LATENCY_S = 3e-6  # performance-facts §8: 3 us constant per memory-bound kernel (AIC)


def memory_bound_kernels(model: ModelSpec, unfused: bool) -> int:
    """Memory-bound kernels of one layer, forward + backward (performance-facts §3.2 ops: two
    norms, two residual adds, the activation, rotary, dropouts; softmax and attention dropout on
    the unfused path), one kernel each way."""
    fwd = 2 + 2 + 1
    fwd += 1 if model.position_embedding_type in ("rope", "yarn") else 0
    fwd += 2 if model.hidden_dropout > 0 else 0
    fwd += (1 + (1 if model.attention_dropout > 0 else 0)) if unfused else 0
    return 2 * fwd


def shares(model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout) -> dict:
    """Each term's share of the predicted step, the compute split into its parts."""
    profile = load_profile(cluster.gpu)
    batch = LayoutBatch.from_layouts([layout])
    est = estimate_performance(model, cluster, job, batch, profile)
    ctx = step_context(model, cluster, job, batch, profile)
    step = float(est.step_time_s[0])
    m, layers = float(ctx.microbatches[0]), float(ctx.layers_per_stage[0])
    gemms = ctx.shapes.attention_gemms + ctx.shapes.dense_mlp_gemms
    elementwise = elementwise_bytes_per_token(model, batch.tp, ctx.sp, ctx.fp8, ctx.fp8_recipe)
    per_mb = {
        "gemm": 3 * layers * gemms_time(ctx, gemms, ctx.tokens, ctx.tp),
        "scores": layers * unfused_scores_time(ctx),
        "elementwise": 3 * layers * elementwise[0] * ctx.tokens / ctx.hbm_bytes_per_s,
        "logits_loss": 3 * logits_time(ctx) + loss_time(ctx),
    }  # fmt: skip
    out = {k: m * float(v[0]) / step for k, v in per_mb.items()}
    b = {k: float(v[0]) / step for k, v in est.breakdown.items()}
    out["core_attn"] = b["compute_s"] - sum(out.values())  # core FLOPs (+ the busiest-stage max)
    out["recompute"] = b["recompute_s"]
    out["tp_comm"] = b["tp_comm_s"] + b["cp_comm_s"] + b["ep_comm_s"]
    out["dp_comm"] = b["dp_comm_s"]
    out["pp"] = b["pp_comm_s"] + b["bubble_s"]
    out["optimizer"] = b["optimizer_s"]
    out["step_fixed"] = profile.step_overhead_s * profile.cluster_step_scale / step
    out["host"] = b["overhead_s"] - out["step_fixed"]
    out["straggler"] = b["straggler_s"]
    unfused = job.attention_backend == "unfused"
    kernels = memory_bound_kernels(model, unfused) * layers * m * (1 + layout_recompute(layout))
    out["check_3us_kernels"] = KERNEL_LATENCY_S * kernels / step
    return {"step_s": step, "tokens_per_s": float(est.tokens_per_s_per_gpu[0]), **out}


def layout_recompute(layout: Layout) -> float:
    """Extra forward passes a recompute replays (full: one more forward, i.e. half a pass of
    fwd + bwd kernels)."""
    return 0.5 if layout.recompute == "full" else 0.0


def parse_layout(text: str) -> Layout:
    """'tp1 pp1 vpp1 cp1 ep1 dp48 mbs4 none' (bench.published_check) -> Layout."""
    parts = text.split()
    val = {p.rstrip("0123456789"): int(p[len(p.rstrip("0123456789")) :]) for p in parts[:-1]}
    return Layout(
        tp=val["tp"], pp=val["pp"], vpp=val["vpp"], cp=val["cp"], ep=val["ep"], dp=val["dp"],
        micro_batch_size=val["mbs"], recompute=parts[-1],  # type: ignore[arg-type]
    )  # fmt: skip


def shared_rows() -> list[dict[str, Any]]:
    out = []
    for m in usable(load()[0]):
        if m.model.hidden_size > SMALL_H and m.source_id not in ("narayanan2021",):
            continue  # all of Narayanan's sweep: the trend needs its large rows too
        s, lay = shares(m.model, m.cluster, m.job, m.layout), m.layout
        out.append(
            {
                "row": m.row_id,
                "source": m.source_id,
                "model": m.model.name,
                "h": m.model.hidden_size,
                "layout": f"tp{lay.tp} pp{lay.pp} mbs{lay.micro_batch_size} {lay.recompute} "
                f"m={m.job.global_batch_size // (lay.dp * lay.micro_batch_size)}",
                "attention": m.job.attention_backend,
                "ratio_shipped": s["tokens_per_s"] / float(m.tokens_per_s_per_gpu or 1.0),
                **s,
            }
        )
    return out


def readme_rows() -> list[dict[str, Any]]:
    published = json.loads((RESULTS / "published_check.json").read_text())
    layouts = {r["case"]: r["layout"] for r in published["results"]}
    out = []
    for case in csv_cases():
        if case.series != "megatron_readme_h100_weak_scaling" or case.case_id not in layouts:
            continue
        layout = parse_layout(layouts[case.case_id])
        s = shares(case.model, case.cluster, case.job, layout)
        out.append(
            {
                "row": case.case_id,
                "source": "megatron_readme_h100",
                "model": case.model.name,
                "h": case.model.hidden_size,
                "layout": layouts[case.case_id],
                "attention": case.job.attention_backend,
                "ratio_shipped": s["tokens_per_s"] / case.published,
                **s,
            }
        )
    return out


def trend(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Spearman of ratio vs h, and the slope of log(ratio) against log(h)."""
    h = np.array([r["h"] for r in rows], dtype=float)
    ratio = np.array([r[key] for r in rows], dtype=float)
    if len(set(h.tolist())) < 3:  # one or two sizes: no trend to speak of
        return {
            "spearman_h": float("nan"),
            "log_slope": float("nan"),
            "median": float(np.median(ratio)),
        }
    rho = float(spearmanr(h, ratio).statistic)
    slope = float(np.polyfit(np.log(h), np.log(ratio), 1)[0])
    return {"spearman_h": rho, "log_slope": slope, "median": float(np.median(ratio))}


FOLDS = ("source", "sweep", "gpu", "family", "stack", "cluster")


def folds(path: Path) -> dict[str, dict[str, float]]:
    """Median and p90 APE after fitting, per CV fold, of one bench.accuracy run."""
    data = json.loads(path.read_text())
    return {f: {k: data[f"cv_by_{f}"]["after"][k] for k in ("median_ape", "p90_ape")}
            | {"prior_" + k: data[f"cv_by_{f}"]["before"][k] for k in ("median_ape", "p90_ape")}
            for f in FOLDS}  # fmt: skip


def loso(path: Path) -> dict[str, float]:
    preds = json.loads(path.read_text())["cv_by_source"]["predictions"]
    return {k: v["after"] / v["measured"] for k, v in preds.items()}


COLS = ("gemm", "core_attn", "scores", "elementwise", "logits_loss", "recompute", "tp_comm",
        "dp_comm", "pp", "optimizer", "host", "step_fixed", "straggler")  # fmt: skip


def table(rows: list[dict[str, Any]], ratio_cols: tuple[str, ...]) -> list[str]:
    head = "| row | model | h | layout | " + " | ".join(ratio_cols) + " | step s | "
    head += " | ".join(COLS) + " | 3 us x kernels (not priced) |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in sorted(rows, key=lambda r: (r["source"], r["h"])):
        ratios = " | ".join(f"{r[c]:.3f}" if r.get(c) is not None else "" for c in ratio_cols)
        parts = " | ".join(f"{100 * r[c]:.1f}" for c in COLS)
        lines.append(
            f"| {r['row']} | {r['model']} | {r['h']} | {r['layout']} | {ratios} | "
            f"{r['step_s']:.3g} | {parts} | {100 * r['check_3us_kernels']:.2f} |"
        )
    return lines


def main(argv: list[str]) -> int:
    out_json = RESULTS / "small_models.json"
    before: dict[str, float] = {}
    folds_before: dict[str, dict[str, float]] = {}
    if "--before" in argv:
        before = loso(Path(argv[argv.index("--before") + 1]))
        folds_before = folds(Path(argv[argv.index("--before") + 1]))
    elif out_json.exists():
        old = json.loads(out_json.read_text())
        before, folds_before = old.get("loso_before", {}), old.get("folds_before", {})
    after = loso(RESULTS / "accuracy.json")
    shared = shared_rows()
    for r in shared:
        r["loso_before"], r["loso_after"] = before.get(r["row"]), after.get(r["row"])
    readme = readme_rows()
    trends: dict[str, Any] = {}
    for src in sorted({r["source"] for r in shared}):
        sub = [r for r in shared if r["source"] == src]
        trends[src] = {k: trend(sub, k) for k in ("loso_before", "loso_after", "ratio_shipped")
                       if all(r.get(k) is not None for r in sub)}  # fmt: skip
    trends["megatron_readme_h100"] = {"ratio_shipped": trend(readme, "ratio_shipped")}
    res = {"commit": commit(), "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "loso_before": before, "folds_before": folds_before,
           "folds_after": folds(RESULTS / "accuracy.json"),
           "shared": shared, "readme": readme, "trends": trends}  # fmt: skip
    out_json.write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / "small_models.md").write_text("\n".join(markdown(res)) + "\n")
    return 0


def markdown(res: dict[str, Any]) -> list[str]:
    lines = [
        "# Small models (issue 12): where the over-prediction came from",
        "",
        f"Commit `{res['commit']}`, {res['date']}. `python -m bench.small_models`. Ratios are "
        "predicted / measured tokens/s per GPU: *LOSO before/after* = leave-one-source-out "
        "(`bench.accuracy`) before and after pricing the unfused attention's score matrix "
        "(`planner/performance/unfused_attention.py`); *shipped* = the shipped profiles now. "
        "Shares are % of the predicted step with the shipped profiles: gemm = the layers' four "
        "GEMMs fwd+bwd, core_attn = attention FLOPs, scores = the unfused score-matrix traffic, "
        "elementwise = norms, adds, activation, dropout (§3.2), logits_loss = LM head and loss, "
        "host = launch/micro-batch host costs, step_fixed = `step_overhead_s` (0.05 s). The last "
        "column sizes a mechanism the model does not price: 3 us per memory-bound kernel "
        "(performance-facts §8) x the §3.2 kernels of every layer and micro-batch.",
        "",
        "## Trend of the ratio with h",
        "",
        "| source | ratio | Spearman(h, ratio) | slope of log ratio vs log h | median ratio |",
        "|---|---|---|---|---|",
    ]
    for src, per in res["trends"].items():
        for key, t in per.items():
            if np.isnan(t["spearman_h"]):
                lines.append(f"| {src} | {key} | n/a (one or two h) | n/a | {t['median']:.3f} |")
                continue
            lines.append(
                f"| {src} | {key} | {t['spearman_h']:.2f} | {t['log_slope']:+.3f} | "
                f"{t['median']:.3f} |"
            )
    lines += [
        "",
        "## Cross-validation, every fold (median / p90 APE after fitting; prior = before any fit)",
        "",
        "| fold | before: prior | before: fitted | after: prior | after: fitted |",
        "|---|---|---|---|---|",
    ]
    for f in FOLDS:
        b, a = res["folds_before"].get(f), res["folds_after"][f]
        cell = lambda d, p="": f"{100 * d[p + 'median_ape']:.1f} / {100 * d[p + 'p90_ape']:.1f} %"  # noqa: E731
        lines.append(
            f"| leave-one-{f}-out | {cell(b, 'prior_') if b else ''} | {cell(b) if b else ''} | "
            f"{cell(a, 'prior_')} | {cell(a)} |"
        )
    lines += ["", "## Shared rows (h <= 4096, and all of Narayanan's sweep)", ""]
    lines += table(res["shared"], ("loso_before", "loso_after", "ratio_shipped"))
    lines += ["", "## Megatron-LM README H100 weak scaling (never fitted; planner's layout)", ""]
    lines += table(res["readme"], ("ratio_shipped",))
    lines += ["", *READING]
    return lines


# the reading's {shipped_noise} is the calibration's noise as the code has it (bench.noise_text)
READING = fill((Path(__file__).parent / "small_models_reading.md").read_text().splitlines())

if __name__ == "__main__":
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.small_models",
        __doc__,
        writes="bench/results/small_models.{json,md}",
        runtime="about 10 seconds",
    )
    parser.add_argument(
        "--before",
        metavar="OLD_accuracy.json",
        help="accuracy run of the code before the change (default: the before kept in "
        "small_models.json)",
    )
    before = parser.parse_args().before
    raise SystemExit(main(["--before", before] if before else []))
