"""Published peaks term by term: the planner's estimate next to what the facts sheets say.

Used by :mod:`bench.memory_recipes` (its report's breakdown section). For each published case
and each term of the estimate on the most loaded rank:

* **states** (weights, gradients, optimizer, fp8 copies): the facts' bytes per parameter
  (megatron-facts §4.3, mechanisms-facts §6.6) times the rank's parameters;
* **activations**, per decoder layer and micro-batch, re-derived from the per-tensor tables of
  mechanisms-facts §6.1 (dense, bf16 and fp8 current scaling) and §6.3 (MoE routed copies), and
  the value the measurement leaves for them: (measured - every other term of the estimate) /
  layer-micro-batches held, i.e. what each layer would have to save for the estimate to match;
* the other terms (logits §5.5; workspaces, buffers, runtime, fragmentation) have no figure in
  the facts: they are the planner's [inferred] terms and are listed as such.

Nothing here changes the estimate; it shows where the excess over a published peak sits.
MLA models (DeepSeek-V3) are not re-derived (no per-tensor MLA table in §6.1-§6.3).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from bench.accuracy import load
from planner.layouts import LayoutBatch
from planner.memory.activations import ActivationShape, layer_activations
from planner.memory.buffers import allocated_bytes
from planner.memory.estimate import TERM_NAMES, MemoryEstimate, MemoryOptions, estimate_memory
from planner.memory.fp8_saved import fp8_saving
from planner.memory.stage_loads import default_loads
from planner.memory.stages import in_flight_microbatches, overlap_extra_layers
from planner.space import comm_flags
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob

GB = 1e9
OTHER_TERMS = (
    "logits_bytes",
    "embedding_input_bytes",
    "workspace_bytes",
    "comm_buffers_bytes",
    "cuda_graphs_bytes",
    "fragmentation_bytes",
    "runtime_overhead_bytes",
)


def facts_layer_bytes(
    model: ModelSpec, seq_length: int, layout: Layout, *, fp8: bool, moe: bool, imbalance: float
) -> float:
    """Bytes one decoder layer saves for one micro-batch, from mechanisms-facts §6.1-§6.3.

    Per token (sharded by t where SP shards it, by t for head- and F-sharded tensors):
    attention norm input 2h, QKV-norm output 2h (fp8: 1h), Q 2ad, K and V 2gd each, O 2ad
    (fp8: + ad for proj's own copy), softmax stats 4a (§6.1); dense MLP: norm input 2h, FC1-norm
    output 2h (fp8: 1h), FC1 output 4F, FC2 input 2F (fp8: 1F) (§6.2); MoE: norm input 2h,
    router input 2h, fp32 logits and scores 2 x 4E, row_id_map 8E + 4, and per routed copy
    2h + 6F_e + 4 (fp8: h + 5F_e + 4) (§6.3). rsigma (8 B) and QK-norm inputs are not in the
    sheets' sums and are left out here.
    """
    t = layout.tp
    sp = t if (layout.sp and t > 1) else 1
    tokens = seq_length / layout.cp * layout.micro_batch_size
    h, a, d = model.hidden_size, model.num_attention_heads, model.head_dim
    kv_heads = max(model.query_groups / t, 1.0)  # K/V heads per TP rank (replicated if g < t)
    norm_out = 1.0 if fp8 else 2.0
    attention = (2 * h + norm_out * h) / sp + (2 * a * d + 2 * a * d) / t + 4 * kv_heads * d
    attention += 4 * a / t + (a * d / t if fp8 else 0.0)
    if not moe:
        f = model.ffn_hidden_size
        mlp = (2 * h + norm_out * h) / sp + (4 * f + (1 if fp8 else 2) * f) / t
        return tokens * (attention + mlp)
    e, fe, k = model.num_experts or 1, model.expert_ffn_hidden_size, model.moe_router_topk
    etp = layout.expert_tp
    per_token = (2 * h + 2 * h + 8 * e + 8 * e + 4) / sp
    per_copy = (h + 5 * fe / etp + 4) if fp8 else (2 * h + 6 * fe / etp + 4)
    copies = tokens / sp * etp * k * imbalance
    return tokens * (attention + per_token) + copies * per_copy


def _planner_layer_bytes(
    model: ModelSpec, job: TrainingJob, batch: LayoutBatch, *, moe: bool, imbalance: float
) -> float:
    shape = ActivationShape.of(job.seq_length, batch)
    acts = layer_activations(
        model, shape, moe=moe, swiglu_fused=True, flash_attention=True, moe_imbalance=imbalance
    )
    saved = acts.full
    if job.precision == "fp8":
        saved = np.maximum(saved - fp8_saving(model, shape, batch, moe=moe, imbalance=imbalance),
                           acts.layer_input)  # fmt: skip
    return float(saved[0])


def _layer_microbatches(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    last: bool,
) -> tuple[float, float]:
    """(dense, MoE) layer x micro-batch products the rank holds (planner.memory.stage_loads)."""
    first_mb, last_mb = in_flight_microbatches(batch, job.global_batch_size)
    a2a = comm_flags.enabled(model, cluster, batch, tp_overlap_on=job.tp_comm_overlap)
    loads = default_loads(model, batch, first_mb, last_mb, overlap_extra_layers(a2a))
    load = loads[1] if last else loads[0]
    return float(load.act_dense[0]), float(load.act_moe[0])


def breakdown(
    case: dict[str, Any], layout: Layout, est: MemoryEstimate, compared_gb: float
) -> dict[str, Any]:
    """Term-by-term rows of one case (``compared_gb``: the estimate on the measured basis)."""
    model, cluster, job = case["model"], case["cluster"], case["job"]
    terms = {k: float(est.terms[k][0]) / GB for k in TERM_NAMES}
    out: dict[str, Any] = {"terms_gb": terms, "measured_gb": case["measured_gb"]}
    if layout.pipeline_layout is not None or model.multi_latent_attention:
        out["activations"] = None  # MLA / explicit layouts: not re-derived (module docstring)
        return out
    batch = LayoutBatch.from_layouts([layout])
    imbalance = job.moe_imbalance
    moe = model.is_moe
    fp8 = job.precision == "fp8"
    facts = facts_layer_bytes(model, job.seq_length, layout, fp8=fp8, moe=moe, imbalance=imbalance)
    planner = _planner_layer_bytes(model, job, batch, moe=moe, imbalance=imbalance)
    dense_mb, moe_mb = _layer_microbatches(model, cluster, job, batch, bool(est.worst_stage[0]))
    held = moe_mb if moe else dense_mb
    # what the measurement leaves for activations: measured minus every other term, on the
    # same basis the case is compared on (allocated rows drop what PyTorch does not count)
    others = compared_gb - terms["activations_bytes"]
    implied = (case["measured_gb"] - others) * GB / held if held else float("nan")
    out["activations"] = {
        "layer_microbatches": held,
        "planner_mb_per_layer": planner / 1e6,
        "facts_mb_per_layer": facts / 1e6,
        "implied_mb_per_layer": implied / 1e6,
        "implied_over_facts": implied / facts,
    }
    return out


def markdown_section(peaks: list[dict[str, Any]], notes: dict[str, str]) -> list[str]:
    """The report's breakdown section: one table of terms, one of activations, then notes."""
    short = [k.removesuffix("_bytes") for k in TERM_NAMES]
    lines = [
        "## Term by term",
        "",
        "GB per GPU on the most loaded rank. States (weights ... fp8) are the facts' bytes per "
        "parameter times the rank's parameters (megatron-facts §4.3, mechanisms-facts §6.6); "
        "the remaining terms except activations have no figure in the facts sheets (planner's "
        "[inferred] terms).",
        "",
        "| case | measured | " + " | ".join(short) + " |",
        "| --- | --- | " + " | ".join("---" for _ in short) + " |",
    ]
    for p in peaks:
        t = p["breakdown"]["terms_gb"]
        cells = " | ".join(f"{t[k]:.2f}" for k in TERM_NAMES)
        lines.append(f"| {p['name']} | {p['measured_gb']:.1f} | {cells} |")
    lines += [
        "",
        "Activations per decoder layer and micro-batch (MB): the planner's, the facts' "
        "(mechanisms-facts §6.1-§6.3 re-derived, `bench.memory_recipes_terms`), and what the "
        "measurement leaves = (measured - all other terms on the compared basis) / "
        "layer-micro-batches held.",
        "",
        "| case | layer x micro-batches | planner MB | facts MB | implied by measured MB "
        "| implied / facts |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in peaks:
        a = p["breakdown"].get("activations")
        if a is None:
            lines.append(f"| {p['name']} | (MLA / explicit layout: not re-derived) | | | | |")
            continue
        lines.append(
            f"| {p['name']} | {a['layer_microbatches']:.0f} | {a['planner_mb_per_layer']:.1f} | "
            f"{a['facts_mb_per_layer']:.1f} | {a['implied_mb_per_layer']:.1f} | "
            f"{a['implied_over_facts']:.2f} |"
        )
    lines += ["", "### Where the excess comes from", ""]
    lines += [f"- **{name}**: {text}" for name, text in notes.items()]
    return lines


def _gb(model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout,
        allocated: bool) -> float:  # fmt: skip
    est = estimate_memory(model, cluster, job, LayoutBatch.from_layouts([layout]))
    if allocated:
        return float(allocated_bytes(est.terms, MemoryOptions())[0]) / GB
    return float(est.total_bytes[0]) / GB


def what_ifs(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Settings the sources leave open, one at a time: how far each moves the estimate. None
    of them is applied to the cases above (each is [U] for that run)."""
    by_name = {c["name"]: c for c in cases}
    out = []
    for name, what, source, change in WHAT_IFS:
        case = by_name[name]
        layout = replace(case["layout"], grad_reduce_dtype="bf16")
        model, cluster, job = case["model"], case["cluster"], case["job"]
        allocated = bool(case.get("allocated"))
        before = _gb(model, cluster, job, layout, allocated)
        job2, layout2 = change(job, layout)
        after = _gb(model, cluster, job2, layout2, allocated)
        out.append({"case": name, "what": what, "source": source,
                    "measured_gb": case["measured_gb"], "before_gb": before,
                    "after_gb": after})  # fmt: skip
    return out


_QWEN_TP2 = "Qwen3-30B-A3B TP2 PP2 EP4 optimizer offload 0"
_LLAMA_PP4 = "Llama3-70B SFT FP8-CS TP4 PP4 VPP5 DP2 + expandable_segments"
WHAT_IFS: tuple[tuple[str, str, str, Any], ...] = (
    (
        _QWEN_TP2,
        "expert TP = TP = 2 instead of the assumed 1",
        "Megatron's default (megatron-facts §2.1 rule 6); the card states TP2 PP2 EP4 only",
        lambda j, lay: (j, replace(lay, etp=None)),
    ),
    (
        _QWEN_TP2,
        "balanced routing (imbalance 1.0 instead of the job's 1.2)",
        "NVIDIA's MoE benchmarks force balance (mechanisms-facts §6.3); not stated by the card",
        lambda j, lay: (replace(j, moe_imbalance=1.0), lay),
    ),
    (
        _QWEN_TP2,
        "full recompute of every layer",
        "not stated by the card [U]; shows how small the activations would have to be",
        lambda j, lay: (j, replace(lay, recompute="full")),
    ),
    (
        "Qwen3-30B-A3B BF16 EP16 alltoall (max allocated)",
        "balanced routing (imbalance 1.0 instead of 1.2)",
        "NVIDIA's MoE benchmarks force balance (mechanisms-facts §6.3)",
        lambda j, lay: (replace(j, moe_imbalance=1.0), lay),
    ),
    (
        _LLAMA_PP4,
        "selective recompute of the dense MLP (`mlp`)",
        "the same card: mlp recompute saved 3.2 GB (mechanisms-facts §6.4)",
        lambda j, lay: (j, replace(lay, recompute="selective", recompute_modules=("mlp",))),
    ),
)
"""(case, what changes, source, change(job, layout) -> (job, layout))."""


def what_if_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "### Settings the sources leave open (not applied above)",
        "",
        "| case | what if | source | measured GB | estimate GB | with it GB | change GB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['what']} | {r['source']} | {r['measured_gb']:.1f} | "
            f"{r['before_gb']:.1f} | {r['after_gb']:.1f} | {r['after_gb'] - r['before_gb']:+.1f} |"
        )
    return lines


def default_stack_lines() -> list[str]:
    """dgxc T0098 (Llama 3.1 8B, CP2, 8 H100) with the planner's default stack and with the
    recipe's: the settings that differ and what each costs."""
    rows = {m.row_id: m for m in load()[0]}
    m = rows["T0098"]
    hbm = m.cluster.gpu.hbm_bytes / GB
    lines = [
        "### Llama 3.1 8B CP2 on 8 H100 (dgxc T0098): the planner's default stack vs the recipe",
        "",
        "| gradients | GB | % of HBM | why |",
        "| --- | --- | --- | --- |",
    ]
    for dtype, why in (
        ("fp32", "the planner's and Megatron-LM's default: with bf16, fp32 accumulation is "
                 "switched on unless `--grad-reduce-in-bf16` (megatron-facts §1.8); the dgxc "
                 "rows' era default in `models_db/measurement_stacks.csv` (the source states "
                 "none), as `bench.memory_recipes` and `bench.published_check` price them"),
        ("bf16", "NeMo's performance recipes (`grad_reduce_in_fp32` off [U]: recalled, not "
                 "in the facts sheets), a what-if"),
    ):  # fmt: skip
        gb = _gb(m.model, m.cluster, m.job, replace(m.layout, grad_reduce_dtype=dtype), False)
        lines.append(f"| {dtype} | {gb:.1f} | {100 * gb / hbm:.1f} % | {why} |")
    return lines
