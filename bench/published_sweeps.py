"""Published LAYOUT sweeps in the never-fitted check: the planner prices the stated layouts.

Used by :mod:`bench.published_check` (issue 12: "Spearman at least 0.7 inside every layout
sweep" on published runs the project has never seen). A layout sweep is one job whose layout or
stack settings vary, with a throughput (or a throughput relative to one of its layouts) for each.
Unlike the check's cases, nothing is searched: each point is the layout the source states,
evaluated with :func:`planner.search.evaluate.evaluate_layouts` (the public API the API's
``/v1/evaluate`` uses) and the shipped profile of its GPU. Each sweep reports, for every point,
the predicted and published throughput relative to the sweep's reference point, their ratio
(``predicted relative / published relative``), and Spearman's rho inside the sweep (3 points or
more; a 2-point sweep reports whether the order agrees).

What each source leaves unstated is filled in the ``assumed`` text, and the SimuMax sweep, whose
sequence, micro-batch and TP overlap are unstated, is re-run under each alternative
(:func:`simumax_sensitivity`). The inventory of every published layout sweep found in the sheets
(added, already elsewhere, shared data, or why not) is in :mod:`bench.published_sweeps_report`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from bench.published_cases import Case, dsv3_gb200_cases
from bench.published_moe_h100 import gpt_oss_cases, qwen3_cases
from models_db.catalog import cluster_spec, load_model
from models_db.profiles import load_profile
from planner.search.evaluate import evaluate_layouts
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob

SPEARMAN_MIN_POINTS = 3
"""Spearman's rho of 2 points is always +-1: such sweeps report the order only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepPoint:
    """One stated layout of a sweep and its published (relative) throughput."""

    label: str
    layout: Layout
    published: float
    """Published throughput: absolute, or relative to the sweep's reference point."""
    job: TrainingJob | None = None
    """The point's own job where the sweep changes the batch with the layout (None: the
    sweep's job)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutSweep:
    """Layouts (or stack settings) of one published job, as the source states them."""

    sweep_id: str
    source: str
    model: ModelSpec
    cluster: ClusterSpec
    job: TrainingJob
    points: tuple[SweepPoint, ...]
    reference: str
    """Label of the point the relative throughputs are taken against."""
    varied: str
    """What changes between the points (layout axes or stack fields)."""
    assumed: str
    headline: bool = True
    """Counted in the scoreboard's Spearman bar (False: a sensitivity variant)."""


# --- performance-facts §6.2: SimuMax's B200 real runs (SIMU b200_release_v1.2_summary.md) -------

SIMU = (
    "performance-facts §6.2: SimuMax B200 real runs, 12-layer Llama-3-70B on 8 GPUs, per-GPU "
    "throughput relative to TP2 DP4 (SIMU docs/b200/b200_release_v1.2_summary.md, real_ms) [M->C]"
)
SIMU_PUBLISHED = {4: (0.89, 0.65), 8: (0.91, 0.62), 32: (0.91, 0.65)}
"""Micro-batches per DP rank -> (TP4 DP2, TP8 DP1) relative to TP2 DP4."""


def llama3_70b_12_layers() -> ModelSpec:
    """models_db's Llama 3.1 70B with num_layers 12, the size of SimuMax's runs."""
    return replace(load_model("llama3.1-70b"), num_layers=12)


def simumax_sweeps(
    *, seq: int = 4096, mbs: int = 1, tp_comm_overlap: bool = False, headline: bool = True
) -> list[LayoutSweep]:
    """One sweep per micro-batch count: TP2 DP4, TP4 DP2, TP8 DP1 on one DGX B200, the
    micro-batch count per DP rank fixed (so the global batch is dp x count x mbs).

    The stack the runs used is not stated; as for every published row (models_db
    measurement_stacks: unknown = the era's default), ``--tp-comm-overlap`` is off, Megatron's
    default (an opt-in flag, megatron-facts §1); the planner's recommended 'on' is a variant."""
    model = llama3_70b_12_layers()
    sweeps = []
    for count, (tp4, tp8) in SIMU_PUBLISHED.items():
        points = []
        for tp, rel in ((2, 1.0), (4, tp4), (8, tp8)):
            dp = 8 // tp
            job = TrainingJob(
                seq_length=seq,
                global_batch_size=dp * count * mbs,
                precision="bf16",
                tp_comm_overlap=tp_comm_overlap,
            )
            points.append(
                SweepPoint(
                    label=f"tp{tp} dp{dp}",
                    layout=Layout(tp=tp, dp=dp, micro_batch_size=mbs, recompute="none"),
                    published=rel,
                    job=job,
                )
            )
        sweeps.append(
            LayoutSweep(
                sweep_id=f"simumax_b200_llama3_70b_12l_{count}mb"
                + ("" if headline else f"_s{seq}_mbs{mbs}_overlap{int(tp_comm_overlap)}"),
                source=SIMU,
                model=model,
                cluster=cluster_spec("dgx-b200", 8),
                job=points[0].job or TrainingJob(seq_length=seq, global_batch_size=1),
                points=tuple(points),
                reference="tp2 dp4",
                varied=f"tp x dp at {count} micro-batches per DP rank",
                assumed=f"models_db llama3.1-70b with num_layers 12; s {seq}, mbs {mbs}, bf16, "
                f"no recompute, SP on, distributed optimizer [U: not stated]; tp_comm_overlap "
                f"{'on' if tp_comm_overlap else 'off (Megatron default: not stated)'}; one DGX "
                "B200",
                headline=headline,
            )
        )
    return sweeps


def simumax_sensitivity() -> list[LayoutSweep]:
    """The unstated sequence, micro-batch and TP overlap of the SimuMax runs, each varied."""
    out = []
    for seq, mbs, overlap in (
        (4096, 1, True),
        (8192, 1, False),
        (8192, 1, True),
        (4096, 2, False),
    ):
        out += simumax_sweeps(seq=seq, mbs=mbs, tp_comm_overlap=overlap, headline=False)
    return out


# --- performance-facts §6.3: the Megatron CP figure (MLM CP_results.png) ------------------------

CP_FIGURE = (
    "performance-facts §6.3: MLM docs/images/context_parallel/CP_results.png, GPT 175B, per-GPU "
    "speed-up over TP8 CP1 with full recompute [V]"
)
CP_PUBLISHED = (
    ("bf16_mha_16k", 16384, False, ((16, 1, 1.13), (8, 2, 1.25))),
    ("bf16_mha_32k", 32768, False, ((32, 1, 0.85), (16, 2, 1.15), (8, 4, 1.20))),
    ("fp8_gqa_16k", 16384, True, ((8, 2, 1.28),)),
    ("fp8_gqa_32k", 32768, True, ((8, 4, 1.30),)),
)
CP_GPUS, CP_PP, CP_MICROBATCHES = 256, 8, 32


def cp_figure_sweeps() -> list[LayoutSweep]:
    """The figure's bars, one sweep per sequence/precision, on an assumed 256-GPU DGX H100 job.

    As in :mod:`bench.mechanisms_cp`: full recompute only for the TP8 CP1 baseline (CP is what
    lets the others drop it); unlike it, the whole step is priced (pp 8, 32 micro-batches per
    pipeline at every layout, so the bubble is the same fraction everywhere)."""
    base = replace(load_model("gpt3-175b"), max_position_embeddings=32768)
    sweeps = []
    for name, seq, fp8_gqa, bars in CP_PUBLISHED:
        model = replace(base, num_query_groups=8) if fp8_gqa else base
        points = []
        for tp, cp, rel in ((8, 1, 1.0), *bars):
            dp = CP_GPUS // (tp * cp * CP_PP)
            points.append(
                SweepPoint(
                    label=f"tp{tp} cp{cp}",
                    layout=Layout(
                        tp=tp,
                        cp=cp,
                        pp=CP_PP,
                        dp=dp,
                        recompute="full" if (tp, cp) == (8, 1) else "none",
                    ),
                    published=rel,
                    job=TrainingJob(
                        seq_length=seq,
                        global_batch_size=dp * CP_MICROBATCHES,
                        precision="fp8" if fp8_gqa else "bf16",
                    ),
                )
            )
        sweeps.append(
            LayoutSweep(
                sweep_id=f"megatron_cp_figure_{name}",
                source=CP_FIGURE,
                model=model,
                cluster=cluster_spec("dgx-h100", CP_GPUS),
                job=points[0].job or TrainingJob(seq_length=seq, global_batch_size=1),
                points=tuple(points),
                reference="tp8 cp1",
                varied="tp x cp (recompute full at TP8 CP1 only)",
                assumed=f"{CP_GPUS} DGX H100 (the figure states no GPU or network), pp {CP_PP}, "
                f"mbs 1, {CP_MICROBATCHES} micro-batches per pipeline, position table raised to "
                "the sequence"
                + (", GQA with 8 query groups, fp8" if fp8_gqa else ", bf16 MHA")
                + "; planner's stack defaults (TP overlap where it applies, cp_comm_type chosen)",
            )
        )
    return sweeps


# --- stack sweeps: mechanisms-facts §3.5 --------------------------------------------------------

DSV3_LADDER = (
    # (label, published TFLOP/s, dispatcher, cuda_graphs, recompute modules); MLM-DSV3 §4 rows
    ("baseline", 494.5, "alltoall", "none", ("mlp", "mla_up_proj")),
    ("DeepEP", 566.1, "flex", "none", ("mlp", "mla_up_proj")),
    ("drop up_proj recompute", 610.7, "flex", "none", ("mlp",)),
    ("CUDA graphs", 663.3, "flex", "partial", ("mlp",)),
)


def dsv3_ladder() -> LayoutSweep:
    """MLM-DSV3's ladder at the rows where a planner field changes (mechanisms-facts §3.5).

    The rows between them (kernel fixes, router fusion, DeepEP tuning, CPU binding) change no
    field, so their gains are part of the next modelled step's published value; the rows after
    'CUDA graphs' change none either (HybridEP is the same flex field), so the ladder stops
    there (the final row is the check's case deepseek-v3-gb200-mlm-dsv3)."""
    final = next(c for c in dsv3_gb200_cases() if c.case_id == "deepseek-v3-gb200-mlm-dsv3")
    assert final.stated_layout is not None
    points = tuple(
        SweepPoint(
            label=label,
            layout=replace(
                final.stated_layout,
                moe_dispatcher=dispatcher,
                cuda_graphs=graphs,
                recompute_modules=modules,
            ),
            published=published,
        )
        for label, published, dispatcher, graphs, modules in DSV3_LADDER
    )
    return LayoutSweep(
        sweep_id="dsv3_gb200_stack_ladder",
        source="mechanisms-facts §3.5: MLM-DSV3 §4, DeepSeek-V3 on 256 GB200, TFLOP/s per GPU "
        "[read]",
        model=final.model,
        cluster=final.cluster,
        job=replace(final.job, moe_imbalance=1.0, moe_grouped_gemm_kernel="multi_stream"),
        points=points,
        reference="baseline",
        varied="moe_dispatcher, cuda_graphs, recompute modules (TP1 PP8 VPP4 EP32 fixed)",
        assumed=final.assumed + "; kernel fixes, router fusion and CPU binding have no field",
    )


def graph_pairs() -> list[LayoutSweep]:
    """Megatron-Bridge's eager vs graphed H100 runs (mechanisms-facts §3.5), from the check's
    cases: the same job, cuda_graphs none vs partial."""
    out = []
    for cases in (qwen3_cases(), gpt_oss_cases()):
        pair = [c for c in cases if c.stated_layout is not None][:2]
        out.append(_pair_from_cases(pair))
    return out


def _pair_from_cases(cases: list[Case]) -> LayoutSweep:
    first = cases[0]
    job = replace(first.job, moe_grouped_gemm_kernel="multi_stream")
    job = replace(job, moe_imbalance=1.0) if first.force_balanced else job
    points = []
    for c in cases:
        assert c.stated_layout is not None
        points.append(
            SweepPoint(
                label=f"cuda_graphs {c.stated_layout.cuda_graphs}",
                layout=c.stated_layout,
                published=c.published,
            )
        )
    return LayoutSweep(
        sweep_id=first.case_id.rsplit("-", 1)[0] + "-graphs-pair",
        source=first.source,
        model=first.model,
        cluster=first.cluster,
        job=job,
        points=tuple(points),
        reference=points[0].label,
        varied="cuda_graphs",
        assumed=first.assumed,
    )


def headline_sweeps() -> list[LayoutSweep]:
    return [*simumax_sweeps(), *cp_figure_sweeps(), dsv3_ladder(), *graph_pairs()]


# --- evaluation ---------------------------------------------------------------------------------


def evaluate_sweep(sweep: LayoutSweep) -> dict[str, Any]:
    """Price every stated point; relative throughputs, their ratio and rho inside the sweep."""
    profile = load_profile(sweep.cluster.gpu)
    predicted: list[float | None] = []
    memory: list[float] = []
    for p in sweep.points:
        job = p.job or sweep.job
        (ev,) = evaluate_layouts(
            sweep.model, sweep.cluster, job, [p.layout], profile, threshold=1.0
        )
        perf = ev["performance"]
        predicted.append(None if perf is None else float(perf["tokens_per_s_per_gpu"]))
        memory.append(float(ev["memory"]["utilization"]))
        if perf is None:
            raise SystemExit(f"{sweep.sweep_id} {p.label}: {ev['violations']}")
    ref = next(i for i, p in enumerate(sweep.points) if p.label == sweep.reference)
    pred = np.array(predicted, dtype=np.float64)
    pub = np.array([p.published for p in sweep.points], dtype=np.float64)
    pred_rel, pub_rel = pred / pred[ref], pub / pub[ref]
    ratio = pred_rel / pub_rel
    others = [i for i in range(len(pub)) if i != ref]
    rho = None
    if len(pub) >= SPEARMAN_MIN_POINTS:
        rho = float(spearmanr(pub_rel, pred_rel).statistic)
    order_agrees = bool(np.all(np.sign(pred_rel[others] - 1.0) == np.sign(pub_rel[others] - 1.0)))
    return {
        "sweep": sweep.sweep_id,
        "source": sweep.source,
        "model": sweep.model.name,
        "gpu": sweep.cluster.gpu.name,
        "num_gpus": sweep.cluster.num_gpus,
        "varied": sweep.varied,
        "assumed": sweep.assumed,
        "headline": sweep.headline,
        "reference": sweep.reference,
        "points": [
            {
                "label": p.label,
                "published_relative": float(pub_rel[i]),
                "predicted_relative": float(pred_rel[i]),
                "ratio": float(ratio[i]),
                "predicted_tokens_per_s_per_gpu": float(pred[i]),
                "memory_utilization": memory[i],
            }
            for i, p in enumerate(sweep.points)
        ],
        "spearman": rho,
        "order_agrees": order_agrees,
        "median_abs_ratio_error": float(np.median(np.abs(ratio[others] - 1.0))),
        "published_spread": float(pub_rel.max() / pub_rel.min() - 1.0),
        "predicted_spread": float(pred_rel.max() / pred_rel.min() - 1.0),
    }


def summarise_sweeps(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The bar's figure: the worst rho over headline sweeps of 3 points or more."""
    head = [r for r in results if r["headline"]]
    ranked = [r for r in head if r["spearman"] is not None]
    pairs = [r for r in head if r["spearman"] is None]
    worst = min(ranked, key=lambda r: r["spearman"]) if ranked else None
    return {
        "sweeps": len(ranked),
        "points": sum(len(r["points"]) for r in ranked),
        "min_spearman": None if worst is None else worst["spearman"],
        "worst_sweep": None if worst is None else worst["sweep"],
        "below_bar": [r["sweep"] for r in ranked if r["spearman"] < 0.7],
        "pairs": len(pairs),
        "pairs_order_agrees": sum(r["order_agrees"] for r in pairs),
        "median_abs_ratio_error": float(
            np.median(
                [
                    abs(p["ratio"] - 1)
                    for r in head
                    for p in r["points"]
                    if p["label"] != r["reference"]
                ]
            )
        )
        if head
        else None,
    }


def run() -> dict[str, Any]:
    results = [evaluate_sweep(s) for s in headline_sweeps()]
    sensitivity = [evaluate_sweep(s) for s in simumax_sensitivity()]
    return {
        "summary": summarise_sweeps(results),
        "results": results,
        "sensitivity": sensitivity,
    }
