"""NVIDIA's published H100 MoE runs in the never-fitted check (series ``moe_h100``, issue 12).

Every H100 MoE figure of the reference sheets with an absolute throughput:

* Megatron-Bridge's CUDA-graphs card (mechanisms-facts §3.5): Qwen3-30B-A3B TP2 PP2 EP4 on two
  nodes, eager 623 ms / 214 TFLOP/s and graphed (attn, moe_router, moe_preprocess) 484 ms /
  274 TFLOP/s; GPT-OSS-20B TP2 PP4 EP4, eager 467-520 ms / 37.9-42.2 and graphed 391-399 ms /
  49.4-50.4 TFLOP/s (the midpoints are compared).
* Megatron-Bridge's MoE workflow card (same section): DeepSeek-V3 on 1,024 H100, FP8
  blockwise, DeepEP, graphs off, EP overlap on: 368 TFLOP/s. The card states no layout, so
  the search chooses it under the stated stack; NVIDIA's H100 layout string (Megatron-MoE-
  ModelZoo, mechanisms-facts §7) is priced beside it, outside the headline.
* Mixtral 8x7B "EP8xTP1 outperforms EP4xTP2" (performance-facts §5.3, MLM MoE README): a
  ranking with no job stated, checked on an assumed job (:func:`mixtral_ranking`).

Batch sizes are not published: as :mod:`bench.mechanisms_host` does, the tokens per iteration
are the published time x TFLOP/s x GPUs / our FLOPs per token, rounded to whole sequences of
4096 (the Bridge recipes' sequence). The stacks are what the cards state; the rest is the
era's Megatron default (alltoall dispatcher on one node's EP group, TE's multi-stream expert
GEMMs, no EP overlap, force-balanced routing as NVIDIA benchmarks, performance-facts §5.3).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.mechanisms_host import case_model
from bench.published_cases import Case, pinned
from models_db.catalog import cluster_spec, load_model
from models_db.profiles import load_profile
from planner import LayoutBatch, estimate_performance
from planner.layout_types import CudaGraphs
from planner.layouts import FloatArray
from planner.model.flops import flops_per_token, padded_vocab
from planner.performance.compute import (
    core_attention_time,
    elementwise_bytes_per_token,
    gemms_time,
    logits_time,
    loss_time,
    router_fwd_equivalent,
)
from planner.performance.context import StepContext, step_context
from planner.performance.expert_parallel import routed_expert_parts
from planner.search.planning import plan
from planner.space.enumeration import SearchConstraints
from planner.space.memory_axes import MemoryChoices
from planner.specs import Layout, ModelSpec, TrainingJob

SERIES = "moe_h100"
MB_GRAPHS = (
    "mechanisms-facts §3.5: Megatron-Bridge skills/nemo-mbridge-perf-cuda-graphs/card.yaml "
    "(NVIDIA runs, H100, TE graphs on attn moe_router moe_preprocess) [read]"
)
MB_MOE_CARD = "mechanisms-facts §3.5: MB MoE workflow card, DeepSeek-V3 on 1,024 H100 [read]"
SEQ = 4096
BRIDGE_STACK = (
    "bf16 [inferred: the card's Qwen3 BF16 row]; moe_dispatcher=alltoall [inferred: EP x ETP "
    "= 4 inside one node, the Bridge recipe]; TE multi-stream expert GEMMs (TE default, "
    "mechanisms-facts §4.1); no EP overlap (Megatron default); moe_imbalance=1.0 (NVIDIA "
    "benchmarks force balance, performance-facts §5.3)"
)


def derived_gbs(model: ModelSpec, layout: Layout, gpus: int, ms: float, tflops: float) -> int:
    """Sequences per iteration from the published time x TFLOP/s (our FLOPs per token), to
    the nearest multiple of dp (one micro-batch of 1 per data-parallel rank at least)."""
    per_seq = flops_per_token(model, padded_vocab(model, layout.tp), SEQ) * SEQ
    sequences = tflops * 1e12 * gpus * ms / 1e3 / per_seq
    return layout.dp * max(1, round(sequences / layout.dp))


def _graph_pair(
    *,
    slug: str,
    model: ModelSpec,
    layout: Layout,
    gpus: int,
    runs: tuple[tuple[CudaGraphs, float, float, str], ...],
    assumed: str,
) -> list[Case]:
    # the graphed run's time and TFLOP/s fix the batch; the eager run is the same job
    graphed = runs[-1]
    gbs = derived_gbs(model, layout, gpus, graphed[1], graphed[2])
    job = TrainingJob(seq_length=SEQ, global_batch_size=gbs, precision="bf16")
    cases = []
    for graphs, ms, tflops, text in runs:
        stated = replace(layout, cuda_graphs=graphs)
        constraints = replace(pinned(stated), etp=layout.etp, moe_a2a_overlap=False)
        cases.append(
            Case(
                case_id=f"{slug}-{'eager' if graphs == 'none' else 'graphs'}",
                series=SERIES,
                model=model,
                cluster=cluster_spec("dgx-h100", gpus),
                job=job,
                constraints=constraints,
                metric="model_tflops_per_gpu",
                published=tflops,
                source=f"{MB_GRAPHS}: {text}",
                assumed=f"s {SEQ}, mbs 1, vpp 1, no recompute; GBS {gbs} (published "
                f"{ms:g} ms x {tflops:g} TFLOP/s); {assumed}",
                force_balanced=True,
                stated=f"tp {layout.tp}, pp {layout.pp}, ep {layout.ep}, {gpus} GPUs, "
                f"cuda_graphs {graphs}",
                free="nothing",
                stack=f"cuda_graphs={graphs} (stated); {BRIDGE_STACK}",
                stated_layout=stated,
            )
        )
    return cases


def qwen3_cases() -> list[Case]:
    layout = Layout(tp=2, pp=2, ep=4, etp=1, dp=4, moe_dispatcher="alltoall")
    return _graph_pair(
        slug="qwen3-30b-a3b-h100-tp2pp2ep4",
        model=load_model("qwen3-30b-a3b"),
        layout=layout,
        gpus=16,
        runs=(
            ("none", 623.0, 214.0, "eager 623 ms, 214 TFLOP/s"),
            ("partial", 484.0, 274.0, "graphed 484 ms, 274 TFLOP/s"),
        ),
        assumed="ETP 1 (the Bridge MoE recipes)",
    )


def gpt_oss_cases() -> list[Case]:
    layout = Layout(tp=2, pp=4, ep=4, etp=1, dp=2, moe_dispatcher="alltoall")
    return _graph_pair(
        slug="gpt-oss-20b-h100-tp2pp4ep4",
        model=case_model("gpt-oss-20b"),
        layout=layout,
        gpus=16,
        runs=(
            ("none", 493.5, 40.05, "eager 467-520 ms, 37.9-42.2 TFLOP/s (midpoints)"),
            ("partial", 395.0, 49.9, "graphed 391-399 ms, 49.4-50.4 TFLOP/s (midpoints)"),
        ),
        assumed="16 GPUs (EP4 with TP2 PP4 needs DP 2); ETP 1; gpt-oss-20b = the gpt-oss-120b "
        "shape with 24 layers and 32 experts [U: not in catalog-facts], with its 128-token "
        "window on even layers, learned sinks and quick-GeGLU (catalog-facts §1.3, §1.6)",
    )


DSV3_ZOO = Layout(
    tp=2,
    pp=8,
    vpp=4,
    ep=64,
    etp=1,
    dp=64,
    pipeline_layout="Et|(tt|)*30mL",
    moe_dispatcher="flex",
    moe_a2a_overlap=True,
    recompute="selective",
    recompute_modules=("mla_up_proj", "mlp", "moe_act", "layernorm"),
)
"""bench/memory_recipes.py's shipped H100 layout: PP8 VPP4 and the layout string are stated by
Megatron-MoE-ModelZoo (mechanisms-facts §7); TP2, EP64 and the recompute modules are recalled
[U]. The MB card's 368 TFLOP/s does not state a layout."""


def dsv3_cases() -> list[Case]:
    model = load_model("deepseek-v3")
    # EP overlap excludes TP comm overlap before Blackwell (planner policy, comm_flags)
    job = TrainingJob(
        seq_length=SEQ,
        global_batch_size=8192,
        precision="fp8",
        fp8_recipe="blockwise",
        tp_comm_overlap=False,
    )
    stack = (
        "fp8_recipe=blockwise (stated; its GEMMs priced 15 % slower than per-tensor fp8, "
        "performance-facts pitfall 6, and 3 % scales on the saved fp8 copies, mechanisms-facts "
        "§6.1); moe_dispatcher=flex/"
        "DeepEP (stated); cuda_graphs=none (stated); moe_a2a_overlap=on (stated); "
        "tp_comm_overlap off (the planner's rule with EP overlap before Blackwell); "
        "moe_imbalance=1.0 (NVIDIA benchmarks force balance)"
    )
    common: dict[str, Any] = {
        "series": SERIES,
        "model": model,
        "cluster": cluster_spec("dgx-h100", 1024),
        "job": job,
        "metric": "model_tflops_per_gpu",
        "published": 368.0,
        "source": MB_MOE_CARD,
        "force_balanced": True,
        "stack": stack,
    }
    # the memory settings NVIDIA's DeepSeek-V3 recipes use are the search's to choose (bf16
    # gradients and moments, their recompute module sets); explicit pipeline layouts are not
    # searched (auto_pipeline_layout takes minutes at 1,024 GPUs)
    free = SearchConstraints(
        moe_dispatcher="flex",
        moe_a2a_overlap=True,
        recompute=("selective", "full"),
        memory=MemoryChoices(allow_numerics_changes=True, search_recompute_modules=True),
    )
    return [
        Case(
            case_id="deepseek-v3-h100-1024-moe-card",
            constraints=free,
            assumed="s 4096, GBS 8192 (the card states neither) [U]; layout free; recompute "
            "selective or full (DeepSeek-V3 does not fit 80 GB without), with NVIDIA's "
            "recompute module sets and bf16 gradients / moments open to the search",
            stated="1,024 H100, FP8 blockwise, DeepEP, graphs off, EP overlap on",
            free="tp pp vpp cp ep mbs recompute",
            **common,
        ),
        Case(
            case_id="deepseek-v3-h100-1024-zoo-layout",
            constraints=replace(pinned(DSV3_ZOO), etp=1, moe_a2a_overlap=True),
            stated_layout=DSV3_ZOO,
            assumed="the Megatron-MoE-ModelZoo H100 layout (PP8 VPP4 'Et|(tt|)*30mL' stated "
            "there; TP2 EP64 and the recompute modules recalled [U]); s 4096, GBS 8192 [U]",
            stated="layout from another source (ModelZoo), stack from the card",
            free="nothing",
            headline=False,
            headline_note="(layout not stated by the card: ModelZoo's, partly recalled [U])",
            **(common | {"series": "moe_h100_zoo_layout"}),
        ),
    ]


def moe_h100_cases() -> list[Case]:
    return qwen3_cases() + gpt_oss_cases() + dsv3_cases()


def mixtral_ranking() -> dict[str, Any]:
    """MLM MoE README: 'EP8xTP1 outperforms EP4xTP2' for Mixtral 8x7B (performance-facts §5.3).

    The README states no job: 64 H100, s 4096, GBS 256, bf16 (the MLM Mixtral example's
    sequence; GPUs and batch assumed). The other axes are free; each side keeps the planner's
    best layout. The statement holds in the planner when EP8xTP1's best is the faster.
    """
    model = load_model("mixtral-8x7b")
    cluster = cluster_spec("dgx-h100", 64)
    job = TrainingJob(seq_length=SEQ, global_batch_size=256, precision="bf16")
    profile = load_profile(cluster.gpu)
    out: dict[str, Any] = {
        "statement": "Mixtral 8x7B: EP8xTP1 outperforms EP4xTP2 (MLM MoE README, "
        "performance-facts §5.3) [V]",
        "assumed": "64 H100, s 4096, GBS 256, bf16, aux-loss routing (moe_imbalance 1.2); "
        "pp, vpp, mbs, recompute free",
    }
    for name, tp, ep in (("ep8_tp1", 1, 8), ("ep4_tp2", 2, 4)):
        res = plan(
            model,
            cluster,
            job,
            constraints=SearchConstraints(tp=tp, ep=ep),
            profile=profile,
            top_k=1,
            threshold=1.0,
        )
        best = res.plans[0] if res.plans else None
        out[name] = None if best is None else float(best.performance["tokens_per_s_per_gpu"])
    a, b = out["ep8_tp1"], out["ep4_tp2"]
    out["holds"] = None if a is None or b is None else bool(a > b)
    return out


# --- term-by-term diagnosis (written into published_check.md) ----------------------------------

PUBLISHED_MS = {
    "qwen3-30b-a3b-h100-tp2pp2ep4-eager": 623.0,
    "qwen3-30b-a3b-h100-tp2pp2ep4-graphs": 484.0,
    "gpt-oss-20b-h100-tp2pp4ep4-eager": 493.5,
    "gpt-oss-20b-h100-tp2pp4ep4-graphs": 395.0,
}


def breakdown(case: Case) -> dict[str, Any]:
    """The planner's step of a stated-layout case, term by term (seconds per iteration), with
    the compute term split into its parts (forward + backward, busiest stage, x micro-batches)."""
    assert case.stated_layout is not None
    job = replace(case.job, moe_imbalance=1.0) if case.force_balanced else case.job
    profile = load_profile(case.cluster.gpu)
    batch = LayoutBatch.from_layouts([case.stated_layout])
    est = estimate_performance(case.model, case.cluster, job, batch, profile)
    ctx = step_context(case.model, case.cluster, job, batch, profile)
    parts = compute_parts(ctx)
    m = float(ctx.microbatches[0])
    layers = float(ctx.layers_per_stage[0])
    row: dict[str, Any] = {
        "case": case.case_id,
        "step_s": float(est.step_time_s[0]),
        "published_s": PUBLISHED_MS.get(case.case_id, float("nan")) / 1e3,
        "microbatches": m,
        "layers_per_stage": layers,
    }
    # per-layer forward units x 3 (fwd + bwd) x layers x micro-batches
    for name, value in parts.items():
        row[f"compute.{name}"] = 3.0 * float(value[0]) * layers * m
    row["compute.logits_loss"] = m * float(3.0 * logits_time(ctx)[0] + loss_time(ctx)[0])
    for key, value in est.breakdown.items():
        row[key] = float(value[0])
    return row


def compute_parts(ctx: StepContext) -> dict[str, FloatArray]:
    """One MoE layer's compute parts in forward units ((fwd + bwd) / 3), as compute_time sums."""
    sh, model = ctx.shapes, ctx.model
    routed = routed_expert_parts(ctx)
    permute_fu = routed.dispatch + routed.combine
    _, moe_bytes, _ = elementwise_bytes_per_token(
        model, ctx.batch.tp, ctx.sp, ctx.fp8, ctx.fp8_recipe
    )
    return {
        "attention_gemms": gemms_time(ctx, sh.attention_gemms, ctx.tokens, ctx.tp),
        "core_attention": core_attention_time(ctx),
        "expert_gemms": routed.experts,
        "permute": permute_fu,
        "router": router_fwd_equivalent(ctx),
        "shared_experts": gemms_time(ctx, sh.shared_expert_gemms, ctx.tokens, ctx.tp),
        "elementwise": moe_bytes * ctx.tokens / ctx.hbm_bytes_per_s,
    }


TERMS = (
    ("compute.attention_gemms", "attn GEMMs"),
    ("compute.core_attention", "core attn"),
    ("compute.expert_gemms", "expert GEMMs"),
    ("compute.permute", "permute"),
    ("compute.router", "router"),
    ("compute.elementwise", "elementwise"),
    ("compute.logits_loss", "logits + loss"),
    ("compute_s", "compute (busiest stage)"),
    ("recompute_s", "recompute"),
    ("tp_comm_s", "TP"),
    ("ep_comm_s", "EP a2a"),
    ("pp_comm_s", "PP"),
    ("dp_comm_s", "DP"),
    ("bubble_s", "bubble"),
    ("optimizer_s", "optimizer"),
    ("overhead_s", "host + fixed"),
    ("straggler_s", "straggler"),
    ("step_s", "step"),
    ("published_s", "published"),
)


def breakdown_markdown(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        "## MoE on H100: the planner's step term by term (moe_h100 stated layouts)",
        "",
        "Milliseconds per iteration. The compute parts are the busiest stage's MoE layers "
        "(forward + backward, all micro-batches); 'compute' is the term itself (the first or "
        "the last stage, whichever is slower: the last adds the output layer and the loss). "
        "Written by `bench/published_moe_h100.py`; the reading is in "
        "`bench/published_check_reading.md`.",
        "",
        "| term | " + " | ".join(r["case"] for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    for key, label in TERMS:
        cells = []
        for r in rows:
            v = r.get(key)
            cells.append("" if v is None or v != v else f"{1e3 * v:.1f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def ranking_markdown(rank: dict[str, Any] | None) -> list[str]:
    if not rank:
        return []
    verdict = {True: "holds", False: "does NOT hold", None: "not evaluated"}[rank["holds"]]
    return [
        "",
        "## Ranking check: Mixtral 8x7B EP8xTP1 vs EP4xTP2",
        "",
        f"{rank['statement']}. Assumed: {rank['assumed']}. Planner's best tokens/s per GPU: "
        f"EP8xTP1 {rank['ep8_tp1']:.0f}, EP4xTP2 {rank['ep4_tp2']:.0f}: the statement "
        f"{verdict} in the planner.",
    ]


def extras(cases: list[Case]) -> dict[str, Any]:
    rows = [breakdown(c) for c in cases if c.series.startswith(SERIES) and c.stated_layout]
    return {"breakdown": rows, "mixtral_ranking": mixtral_ranking()}


def extras_markdown(payload: dict[str, Any] | None) -> list[str]:
    if not payload:
        return []
    return breakdown_markdown(payload["breakdown"]) + ranking_markdown(payload["mixtral_ranking"])
