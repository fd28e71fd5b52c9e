"""The layout sweeps' page section: inventory, results, sensitivity and term-by-term diagnosis.

Used by :mod:`bench.published_check` (the markdown goes into ``published_check.md``). The
inventory lists every published layout sweep found in ``shared/reference`` and ``shared/data``
with what became of it; the diagnosis prices the SimuMax TP sweep and the CP figure's bars term
by term with the planner's own step terms (:func:`planner.estimate_performance`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from bench.published_sweeps import (
    LayoutSweep,
    cp_figure_sweeps,
    evaluate_sweep,
    run,
    simumax_sweeps,
)
from models_db.profiles import load_profile
from planner import LayoutBatch, estimate_performance
from planner.performance import tensor_parallel
from planner.performance.compute import (
    core_attention_time,
    elementwise_bytes_per_token,
    gemms_time,
    logits_time,
    loss_time,
)
from planner.performance.context import step_context
from planner.performance.tensor_parallel import tp_layer_comm_fwd

# (sweep, source, points, status, why); status: added / elsewhere / shared / not added
INVENTORY: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "SimuMax B200 Llama-3-70B (12 layers) TP2/TP4/TP8 at 4/8/32 micro-batches",
        "performance-facts §6.2",
        "3 sweeps x 3",
        "added",
        "simumax_b200_llama3_70b_12l_*; s, mbs, TP overlap unstated: sensitivity below",
    ),
    (
        "Megatron CP figure, GPT 175B, TP x CP at 16K / 32K (BF16 MHA; FP8 GQA)",
        "performance-facts §6.3",
        "3 + 4 points; 2 pairs",
        "added",
        "megatron_cp_figure_*: one job per bar group, so it is a layout sweep; also priced layer "
        "by layer in bench/mechanisms.py (kept: the CP bar of the scoreboard reads that one)",
    ),
    (
        "DeepSeek-V3 256 GB200 optimisation ladder (MLM-DSV3)",
        "mechanisms-facts §3.5",
        "4 of 13 rows",
        "added",
        "dsv3_gb200_stack_ladder at the rows where a stack field changes (dispatcher, "
        "recompute modules, graphs); baseline and final rows were already cases",
    ),
    (
        "Megatron-Bridge H100 CUDA-graphs card: Qwen3-30B-A3B, GPT-OSS-20B eager vs graphs",
        "mechanisms-facts §3.5",
        "2 pairs",
        "added (pairs)",
        "the check's moe_h100 cases, read as eager/graphed pairs (order + ratio)",
    ),
    (
        "Mixtral 8x7B EP8xTP1 outperforms EP4xTP2",
        "performance-facts §5.3",
        "1 pair, no numbers",
        "already in the check",
        "published_moe_h100.mixtral_ranking (assumed job; the planner's best of each side)",
    ),
    (
        "Qwen3-30B-A3B BF16 alltoall, graphed replay 42.00 s vs eager 41.36 s",
        "mechanisms-facts §3.5",
        "1 pair",
        "not added",
        "layout, batch and GPU count of that run are not stated",
    ),
    (
        "TP2 CP2 beats TP4 when s > h (MB performance-guide)",
        "mechanisms-facts §1.7",
        "statement",
        "not added",
        "no model, job or number: nothing to price",
    ),
    (
        "full recompute costs 'about 30 %' / 'up to ~30 %'",
        "performance-facts §6.3, mechanisms-facts §1.7",
        "statement",
        "not added",
        "a bound on one setting with no job; the CP figure's TP8 CP1 bars price it",
    ),
    (
        "interleaved schedule 'improves throughput by 10+ %'",
        "performance-facts §7",
        "statement",
        "not added",
        "[Q] abstract, no job or layout",
    ),
    (
        "Megatron-LM README weak and strong scaling; dgxc weak scaling; Llama 3 Table 4",
        "performance-facts §1.7, shared data",
        "series",
        "already in the check",
        "GPU count and model change with the layout: scaling series, not layout sweeps "
        "(their Spearman is reported in the series table, not in the bar)",
    ),
    (
        "Korthikanti 2022 Table 5 (full vs selective + SP) and Table 4 (one 22B layer)",
        "performance-facts §1.7, shared data korthikanti2022_*",
        "5 pairs, 5 rows",
        "shared data",
        "fitted by the shipped profiles: not never-seen (in bench.accuracy's CV)",
    ),
    (
        "Narayanan 2021 Table 2 (GPT-3 175B / 530B, PTD-P layouts)",
        "shared data narayanan2021_table2_*",
        "2 sweeps x 6",
        "shared data",
        "fitted by the shipped profiles",
    ),
    (
        "BLOOM pre-study layout rounds (TP/PP/mbs/heads at 48 nodes)",
        "shared data bloom_prequel_*",
        "14 sweeps",
        "shared data",
        "fitted by the shipped profiles",
    ),
    (
        "dgxc Grok-1 / Llama 405B reduced-layer proxies; NeMo 24.07 GPT-3 175B",
        "shared data dgxc_*, nemo2407_*",
        "3 series",
        "shared data",
        "fitted; layout changes with the GPU count",
    ),
)


def inventory_markdown() -> list[str]:
    lines = [
        "",
        "## Layout sweeps: inventory of the published ones",
        "",
        "Every published sweep of one job whose layout or stack settings vary, found in "
        "`shared/reference/*.md` and `shared/data` (sweeps of the shared CSV are fitted by the "
        "shipped profiles, so they are listed but not checked here).",
        "",
        "| sweep | where | points | status | why / where |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in INVENTORY]
    return lines


def _point_row(r: dict[str, Any], p: dict[str, Any]) -> str:
    ref = p["label"] == r["reference"]
    ratio = "" if ref else f"{p['ratio']:.3f}"
    return (
        f"| {r['sweep']} | {p['label']}{' (ref.)' if ref else ''} | "
        f"{p['published_relative']:.3f} | {p['predicted_relative']:.3f} | "
        f"{ratio} | {p['predicted_tokens_per_s_per_gpu']:.4g} | "
        f"{100 * p['memory_utilization']:.0f} % |"
    )


def results_markdown(payload: dict[str, Any]) -> list[str]:
    s = payload["summary"]
    lines = [
        "",
        "## Layout sweeps: the stated layouts priced (never fitted)",
        "",
        f"{s['sweeps']} sweeps of 3 points or more ({s['points']} points): Spearman min "
        f"{s['min_spearman']:.2f} ({s['worst_sweep']}); below 0.7: "
        f"{', '.join(s['below_bar']) or 'none'}. {s['pairs']} two-point sweeps: the order agrees "
        f"in {s['pairs_order_agrees']}. Median |relative ratio - 1| over the non-reference "
        f"points {100 * s['median_abs_ratio_error']:.1f} %. Throughput relative to each sweep's "
        "reference point (published relative vs predicted relative); *ratio* = predicted "
        "relative / published relative; memory = our estimate at the stated layout (priced "
        "whatever it says).",
        "",
        "| sweep | Spearman | order agrees | spread published / predicted | varied |",
        "|---|---|---|---|---|",
    ]
    for r in payload["results"]:
        rho = "n/a (2 points)" if r["spearman"] is None else f"{r['spearman']:.2f}"
        lines.append(
            f"| {r['sweep']} | {rho} | {'yes' if r['order_agrees'] else 'NO'} | "
            f"{100 * r['published_spread']:.0f} % / {100 * r['predicted_spread']:.0f} % | "
            f"{r['varied']} |"
        )
    lines += [
        "",
        "| sweep | point | published rel. | predicted rel. | ratio | predicted tokens/s/GPU "
        "| memory |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in payload["results"]:
        lines += [_point_row(r, p) for p in r["points"]]
    lines += ["", "Sources and assumptions:", ""]
    lines += [
        f"- {r['sweep']}: {r['source']}. Assumed: {r['assumed']}." for r in payload["results"]
    ]
    lines += [
        "",
        "SimuMax's unstated settings, each varied (TP4 and TP8 relative to TP2; published "
        "0.89/0.91/0.91 and 0.65/0.62/0.65 at 4/8/32 micro-batches):",
        "",
        "| assumption | TP4 at 4 / 8 / 32 | TP8 at 4 / 8 / 32 | Spearman |",
        "|---|---|---|---|",
    ]
    for row in _sensitivity_rows(payload["results"] + payload["sensitivity"]):
        lines.append(row)
    return lines


def _sensitivity_rows(results: list[dict[str, Any]]) -> list[str]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if not r["sweep"].startswith("simumax"):
            continue
        tail = r["sweep"].split("mb", 1)[1].lstrip("_") or "s4096_mbs1_overlap0 (headline)"
        groups.setdefault(tail, []).append(r)
    rows = []
    for name, rs in groups.items():
        tp4 = " / ".join(f"{r['points'][1]['predicted_relative']:.2f}" for r in rs)
        tp8 = " / ".join(f"{r['points'][2]['predicted_relative']:.2f}" for r in rs)
        rhos = ", ".join(f"{r['spearman']:.2f}" for r in rs)
        rows.append(f"| {name.replace('_', ' ')} | {tp4} | {tp8} | {rhos} |")
    return rows


# --- term by term -------------------------------------------------------------------------------


def point_breakdown(sweep: LayoutSweep, label: str) -> dict[str, float]:
    """One stated point's step per micro-batch, in ms: compute parts (forward + backward, all
    layers of the busiest stage), the TP collectives before hiding, and the step terms."""
    point = next(p for p in sweep.points if p.label == label)
    job = point.job or sweep.job
    profile = load_profile(sweep.cluster.gpu)
    batch = LayoutBatch.from_layouts([point.layout])
    est = estimate_performance(sweep.model, sweep.cluster, job, batch, profile)
    ctx = step_context(sweep.model, sweep.cluster, job, batch, profile)
    m, layers = float(ctx.microbatches[0]), float(ctx.layers_per_stage[0])
    sh = ctx.shapes
    dense_bytes, _, _ = elementwise_bytes_per_token(
        sweep.model, batch.tp, ctx.sp, ctx.fp8, ctx.fp8_recipe
    )
    per_layer = {
        "attention GEMMs": gemms_time(ctx, sh.attention_gemms, ctx.tokens, ctx.tp),
        "MLP GEMMs": gemms_time(ctx, sh.dense_mlp_gemms, ctx.tokens, ctx.tp),
        "core attention": core_attention_time(ctx),
        "memory-bound ops": dense_bytes * ctx.tokens / ctx.hbm_bytes_per_s,
    }
    # forward units x 3 (fwd + bwd, megatron-facts §5) x layers; per micro-batch, in ms
    out = {k: 3e3 * float(v[0]) * layers for k, v in per_layer.items()}
    out["logits + loss"] = 1e3 * float(3.0 * logits_time(ctx)[0] + loss_time(ctx)[0])
    # achieved TFLOP/s of each layer GEMM at its per-GPU shape (performance-facts §1.3 compares)
    for g in (*sh.attention_gemms, *sh.dense_mlp_gemms):
        flop = g.fwd_flop_per_token * ctx.tokens / ctx.tp
        rate = flop / gemms_time(ctx, (g,), ctx.tokens, ctx.tp)
        name = f"GEMM n {g.n:.0f} x k {g.k:.0f} (/tp on {g.shard or '-'}): TFLOP/s"
        out[name] = float(rate[0]) / 1e12
    tp_fwd = float(tp_layer_comm_fwd(ctx)[0])
    out["TP collectives, before hiding (fwd + bwd)"] = 2e3 * tp_fwd * layers
    out["TP message MiB"] = float(ctx.activation_bytes[0]) / 2**20
    for key, value in est.breakdown.items():
        out[f"step: {key}"] = 1e3 * float(value[0]) / m
    out["step per micro-batch"] = 1e3 * float(est.step_time_s[0]) / m
    return out


def diagnosis() -> dict[str, Any]:
    """The SimuMax sweep at 32 micro-batches (where the per-step fixed cost is amortised) and
    the CP figure's 16K bars, point by point."""
    simu = next(s for s in simumax_sweeps() if s.sweep_id.endswith("_32mb"))
    on = next(s for s in simumax_sweeps(tp_comm_overlap=True) if s.sweep_id.endswith("_32mb"))
    cp16 = cp_figure_sweeps()[0]
    return {
        "cp_what_if": cp_what_ifs(),
        "simumax_32mb": {p.label: point_breakdown(simu, p.label) for p in simu.points},
        "simumax_32mb_overlap_on": {p.label: point_breakdown(on, p.label) for p in on.points},
        "cp_figure_16k": {p.label: point_breakdown(cp16, p.label) for p in cp16.points},
    }


def _overlap_anywhere(cluster: Any, tp: Any, sp: Any) -> Any:
    """What-if: TE's userbuffers overlap on every TP group with SP, nodes or not."""
    return (np.asarray(tp) > 1) & np.asarray(sp, dtype=np.bool_)


def cp_what_ifs() -> dict[str, Any]:
    """The CP figure's ranked sweeps under two what-ifs that are NOT the shipped model, to find
    the term that decides the cross-node TP bars: a 16-GPU NVLink domain (same NICs), and
    --tp-comm-overlap priced across nodes (the planner emits it only inside a node)."""
    out: dict[str, Any] = {}
    for sweep in cp_figure_sweeps():
        if len(sweep.points) < 3:
            continue
        wide = evaluate_sweep(replace(sweep, cluster=replace(sweep.cluster, gpus_per_node=16)))
        with mock.patch.object(tensor_parallel, "tp_comm_overlap", _overlap_anywhere):
            across = evaluate_sweep(sweep)
        out[sweep.sweep_id] = {
            name: {
                "spearman": r["spearman"],
                "relative": {p["label"]: p["predicted_relative"] for p in r["points"]},
            }
            for name, r in (("nvlink_16", wide), ("tp_overlap_across_nodes", across))
        }
    return out


def _what_if_lines(what: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "What-ifs on the CP figure (not the shipped model): predicted relative throughput per bar "
        "and Spearman, (a) with 16 GPUs per NVLink domain, (b) with TP overlap priced across "
        "nodes at the profile's in-node hidden fraction.",
        "",
        "| sweep | what-if | bars (predicted relative) | Spearman |",
        "|---|---|---|---|",
    ]
    for sweep, cases in what.items():
        for name, r in cases.items():
            bars = ", ".join(f"{k} {v:.3f}" for k, v in r["relative"].items())
            lines.append(f"| {sweep} | {name.replace('_', ' ')} | {bars} | {r['spearman']:.2f} |")
    return lines


def diagnosis_markdown(diag: dict[str, Any]) -> list[str]:
    lines: list[str] = _what_if_lines(diag.get("cp_what_if", {}))
    diag = {k: v for k, v in diag.items() if k != "cp_what_if"}
    titles = {
        "simumax_32mb": "SimuMax B200 sweep, 32 micro-batches, s 4096, TP overlap off (ms per "
        "micro-batch; TP8's per-GPU throughput is 4x its micro-batch rate over TP2's)",
        "simumax_32mb_overlap_on": "same, TP overlap on (the planner's recommended stack)",
        "cp_figure_16k": "CP figure, 16K BF16 MHA (ms per micro-batch, pp 8: one stage)",
    }
    for key, table in diag.items():
        labels = list(table)
        terms = [t for t in table[labels[0]] if any(abs(table[lab][t]) > 1e-3 for lab in labels)]
        lines += [
            "",
            f"Term by term: {titles[key]}",
            "",
            "| term | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for t in terms:
            lines.append(f"| {t} | " + " | ".join(f"{table[lab][t]:.2f}" for lab in labels) + " |")
    return lines


READING = Path(__file__).with_name("published_sweeps_reading.md")
"""Why the sweeps come out as they do: the hand-written reading, appended after the tables."""


def sweeps_markdown(payload: dict[str, Any] | None) -> list[str]:
    """The whole layout-sweep section of ``published_check.md``."""
    if payload is None:
        return []
    lines = inventory_markdown() + results_markdown(payload)
    lines += diagnosis_markdown(payload["diagnosis"])
    if READING.exists():
        lines += ["", READING.read_text(encoding="utf-8").rstrip()]
    return lines


def sweeps_payload() -> dict[str, Any]:
    return run() | {"diagnosis": diagnosis()}
