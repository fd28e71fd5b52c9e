"""MoE memory, term by term: the estimate before and after the MoE corrections, with sources.

Run from the repository root::

    python -m bench.memory_moe_terms [--out-dir bench/results]
    python -m bench.memory_moe_terms --snapshot PATH   # write the raw terms only

The Qwen3 and DeepSeek-V3 cases of ``bench.memory_recipes`` and the DeepSeek-V3 GB200 layout
of ``bench.published_cases`` (NVIDIA ran it) are priced with the same inputs before and after.
"Before" is ``bench/results/memory_moe_terms_before.json``, written with ``--snapshot`` by this
module against the estimator of main at ``dc07d0d`` (the planner of that commit on the path);
"after" is the estimator of this tree. Each term's change is listed with the mechanism behind
it and its source (:data:`CHANGES`); nothing was fitted to the measured peaks.

Per-token rows give one MoE layer's saved activations (``layer_activations`` at b = 1, t = 1,
imbalance of the case) and what fp8 changes in them, so each itemised change can be checked by
hand against mechanisms-facts §6.1-§6.3.

Writes ``memory_moe_terms.json`` and ``memory_moe_terms.md``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.published_cases import dsv3_gb200_cases
from models_db.catalog import cluster_spec, load_model
from planner.layouts import LayoutBatch
from planner.memory.activations import ActivationShape, layer_activations
from planner.memory.estimate import TERM_NAMES, MemoryOptions, estimate_memory
from planner.memory.recompute import fp8_saving
from planner.specs import Layout, ModelSpec, TrainingJob

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results"
BEFORE = RESULTS / "memory_moe_terms_before.json"
GB = 1e9

CHANGES: dict[str, list[str]] = {
    "activations_bytes": [
        "routed copies use the job's moe_imbalance (1.0 where the run forces balance, as "
        "NVIDIA's benchmarks do: performance-facts §5.3), no longer a fixed 1.2",
        "fp8 per module: proj's fp8 copy beside the bf16 O (+a d_v), MLA latents (-q_lora - "
        "kv_lora), shared-expert FC1 copy (+h) and FC2 input (-F_s) (mechanisms-facts §6.1, "
        "MLM-DSV3 §2.2.2); routed copies -(h + F_e) as before (§6.3)",
        "fused permute's int32 row_id_map, (8E + 4) B per token (§4.4, TE permutation.py)",
        "A2A overlap: one extra layer, not one extra micro-batch (forward layer i paired with "
        "backward layer n-1-i; megatron-facts §3.3, performance-facts §6.4)",
    ],
    "comm_buffers_bytes": [
        "flex (DeepEP/HybridEP) fuses permute 1 into its kernel: one routed copy in flight "
        "instead of two (mechanisms-facts §4.4, MLM-DSV3 §2.1.1); 'auto' dispatch resolved "
        "as the planner emits it (comm_flags.flex_dispatch)",
        "routed copies use the job's moe_imbalance",
    ],
    "workspace_bytes": ["routed-copy gradients use the job's moe_imbalance"],
    "fragmentation_bytes": ["a fraction of the dynamic terms above: follows them"],
}


def _qwen_cases() -> list[dict[str, Any]]:
    qwen = load_model("qwen3-30b-a3b")
    h100 = cluster_spec("dgx-h100", 16)
    bf16 = TrainingJob(seq_length=4096, global_batch_size=128)
    grads = {"grad_reduce_dtype": "bf16"}  # Megatron-Bridge recipes (bench.memory_recipes)
    return [
        {"case": "Qwen3-30B-A3B EP16 alltoall, graphs (max allocated 61.35 GB)", "model": qwen,
         "cluster": h100, "job": bf16, "measured_gb": 61.35, "allocated": True,
         "layout": Layout(ep=16, dp=16, moe_dispatcher="alltoall", moe_a2a_overlap=False,
                          cuda_graphs="partial", **grads)},
        {"case": "Qwen3-30B-A3B EP16 alltoall as first priced (A2A overlap auto = on, no graphs)",
         "model": qwen, "cluster": h100, "job": bf16, "measured_gb": 61.35, "allocated": True,
         "layout": Layout(ep=16, dp=16, moe_dispatcher="alltoall", **grads)},
        {"case": "Qwen3-30B-A3B EP16 HybridEP + EP overlap (peak allocated 66.75 GB)",
         "model": qwen, "cluster": h100, "job": bf16, "measured_gb": 66.75, "allocated": True,
         "layout": Layout(ep=16, dp=16, moe_dispatcher="flex", moe_a2a_overlap=True, **grads)},
        {"case": "Qwen3-30B-A3B TP2 PP2 EP4 (47.2 GB)", "model": qwen, "cluster": h100,
         "job": bf16, "measured_gb": 47.2, "allocated": False,
         "layout": Layout(tp=2, pp=2, ep=4, etp=1, dp=4, **grads)},
    ]  # fmt: skip


def _dsv3_cases() -> list[dict[str, Any]]:
    dsv3 = load_model("deepseek-v3")
    out: list[dict[str, Any]] = [
        {"case": "DeepSeek-V3 PP4 VPP4 EP64 H100, no memory optimisations (199.5 GB, OOM)",
         "model": dsv3, "cluster": cluster_spec("dgx-h100", 256),
         "job": TrainingJob(seq_length=4096, global_batch_size=256, precision="fp8"),
         "measured_gb": 199.5, "allocated": False,
         "layout": Layout(pp=4, vpp=4, ep=64, etp=1, dp=64,
                          pipeline_layout="Et*4|(tttt|)*14tmL")},
    ]  # fmt: skip
    for c in dsv3_gb200_cases():
        if c.stated_layout is None:
            continue
        job = replace(c.job, moe_imbalance=1.0) if c.force_balanced else c.job
        out.append({
            "case": f"DeepSeek-V3 GB200 {c.case_id} (ran; stated layout)", "model": c.model,
            "cluster": c.cluster, "job": job, "measured_gb": None, "allocated": False,
            "layout": c.stated_layout,
        })  # fmt: skip
    return out


def cases() -> list[dict[str, Any]]:
    return _qwen_cases() + _dsv3_cases()


def _per_token(model: ModelSpec, job: TrainingJob, layout: Layout) -> dict[str, float]:
    """One MoE layer's saved bytes per token at b = 1, t = 1 (and fp8's change)."""
    single = replace(layout, tp=1, cp=1, micro_batch_size=1, pp=1, vpp=1, pipeline_layout=None)
    batch = LayoutBatch.from_layouts([single])
    shape = ActivationShape.of(job.seq_length, batch)
    acts = layer_activations(
        model, shape, moe=True, swiglu_fused=True, flash_attention=True,
        moe_imbalance=job.moe_imbalance,
    )  # fmt: skip
    fp8 = fp8_saving(model, shape, batch, moe=True, imbalance=job.moe_imbalance)
    tokens = float(shape.tokens[0])
    return {
        "attention": float(acts.attention[0]) / tokens,
        "moe_block": float(acts.mlp[0]) / tokens,
        "fp8_saving": float(fp8[0]) / tokens,
    }


def measure(case: dict[str, Any]) -> dict[str, Any]:
    model, cluster, job, layout = case["model"], case["cluster"], case["job"], case["layout"]
    est = estimate_memory(model, cluster, job, LayoutBatch.from_layouts([layout]))
    terms = {k: float(est.terms[k][0]) for k in TERM_NAMES}
    return {
        "case": case["case"],
        "total_bytes": float(est.total_bytes[0]),
        "hbm_bytes": float(cluster.gpu.hbm_bytes),
        "worst_rank": int(est.worst_rank[0]) if est.worst_rank is not None else 0,
        "terms": terms,
        "per_token": _per_token(model, job, layout),
    }


def _allocated(terms: dict[str, float]) -> float:
    """PyTorch's share of the estimate (planner.memory.buffers.allocated_bytes)."""
    from numpy import asarray

    from planner.memory.buffers import allocated_bytes

    arrays = {k: asarray([v]) for k, v in terms.items()}
    return float(allocated_bytes(arrays, MemoryOptions())[0])


def what_if() -> list[dict[str, Any]]:
    """NVIDIA's final DSv3 GB200 layout with memory settings MLM-DSV3 does not state but the
    DSv3 recipes use [U: issue 13's reading of them]: the precision-aware optimizer with bf16
    moments and bf16 gradients (mechanisms-facts §6.6), and ``expandable_segments`` (the MoE
    README's advice against fragmentation, §6.7). After the corrections only."""
    base = next(c for c in _dsv3_cases() if c["case"].endswith("mlm-dsv3 (ran; stated layout)"))
    lay, job = base["layout"], base["job"]
    precision = replace(lay, grad_reduce_dtype="bf16", optimizer_state_dtype="bf16")
    variants = [
        ("as stated (fp32 gradients and moments, cached allocator)", lay, job),
        ("+ expandable_segments", lay, replace(job, expandable_segments=True)),
        ("+ bf16 gradients and moments", precision, job),
        ("+ both", precision, replace(job, expandable_segments=True)),
    ]
    out = []
    for name, layout, j in variants:
        est = estimate_memory(base["model"], base["cluster"], j, LayoutBatch.from_layouts([layout]))
        total = float(est.total_bytes[0])
        out.append({"variant": name, "total_gb": total / GB,
                    "hbm_share": total / base["cluster"].gpu.hbm_bytes,
                    "within_80": bool(est.fits[0])})  # fmt: skip
    return out


def _cell(before: float, after: float) -> str:
    delta = after - before
    change = f" ({delta / GB:+.2f})" if abs(delta) >= 0.005 * GB else ""
    return f"{before / GB:.2f} -> {after / GB:.2f}{change}"


def markdown(rows: list[dict[str, Any]], variants: list[dict[str, Any]]) -> str:
    lines = [
        "# MoE memory: each term before and after the MoE corrections",
        "",
        "Generated by `python -m bench.memory_moe_terms`; cases, inputs and the before "
        "snapshot in the module docstring. GB = 1e9 bytes, worst pipeline rank of each case.",
        "",
        "| case | measured GB | before: compared GB (error) | after: compared GB (error) | "
        "whole estimate before -> after (% of HBM) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        b, a = r["before"], r["after"]
        measured = r["measured_gb"]

        def compared(x: dict[str, Any], r: dict[str, Any] = r, measured: Any = measured) -> str:
            value = (_allocated(x["terms"]) if r["allocated"] else x["total_bytes"]) / GB
            kind = "allocated" if r["allocated"] else "peak"
            if measured is None:
                return f"{value:.1f} {kind}"
            return f"{value:.1f} {kind} ({100 * (value / measured - 1):+.1f} %)"

        lines.append(
            f"| {r['case']} | {measured if measured is not None else 'ran'} | {compared(b)} | "
            f"{compared(a)} | {b['total_bytes'] / GB:.1f} -> {a['total_bytes'] / GB:.1f} "
            f"({100 * a['total_bytes'] / a['hbm_bytes']:.0f} %) |"
        )
    lines += ["", "## Terms (GB per GPU, before -> after)", ""]
    lines += ["| case | " + " | ".join(k.removesuffix("_bytes") for k in TERM_NAMES) + " |"]
    lines += ["| --- " * (len(TERM_NAMES) + 1) + "|"]
    for r in rows:
        cells = [_cell(r["before"]["terms"][k], r["after"]["terms"][k]) for k in TERM_NAMES]
        lines.append(f"| {r['case']} | " + " | ".join(cells) + " |")
    lines += ["", "## One MoE layer per token (bytes, b = 1, t = 1, the case's imbalance)", ""]
    lines += ["| case | attention | MoE block | fp8 saving (negative: costs) |",
              "| --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        b, a = r["before"]["per_token"], r["after"]["per_token"]
        cells = [f"{b[k]:,.0f} -> {a[k]:,.0f}" for k in ("attention", "moe_block", "fp8_saving")]
        lines.append(f"| {r['case']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## DeepSeek-V3 GB200 final layout with the recipe's unstated memory settings",
        "",
        "| variant | estimate GB | % of HBM | within 80 % |",
        "| --- | --- | --- | --- |",
    ]
    for v in variants:
        lines.append(f"| {v['variant']} | {v['total_gb']:.1f} | {100 * v['hbm_share']:.0f} % | "
                     f"{'yes' if v['within_80'] else 'no'} |")  # fmt: skip
    lines += ["", "## What changed, per term, and why", ""]
    for term, why in CHANGES.items():
        lines.append(f"- **{term.removesuffix('_bytes')}**:")
        lines += [f"  - {w}" for w in why]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--snapshot", type=Path, help="write the raw terms here and stop")
    args = parser.parse_args(argv)
    all_cases = cases()
    measured = [measure(c) for c in all_cases]
    if args.snapshot is not None:
        args.snapshot.write_text(json.dumps(measured, indent=2) + "\n")
        return 0
    before = {m["case"]: m for m in json.loads(BEFORE.read_text())}
    rows = []
    for case, after in zip(all_cases, measured, strict=True):
        if case["case"] not in before:
            raise SystemExit(f"{case['case']!r} is not in {BEFORE}: re-run --snapshot on main")
        rows.append({"case": case["case"], "measured_gb": case["measured_gb"],
                     "allocated": case["allocated"], "before": before[case["case"]],
                     "after": after})  # fmt: skip
    args.out_dir.mkdir(parents=True, exist_ok=True)
    variants = what_if()
    payload = {"cases": rows, "dsv3_gb200_variants": variants}
    (args.out_dir / "memory_moe_terms.json").write_text(json.dumps(payload, indent=2) + "\n")
    text = markdown(rows, variants)
    (args.out_dir / "memory_moe_terms.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
