"""Memory-estimator accuracy on the published BLOOM-176B pre-study rows.

Run from the repository root::

    python -m bench.memory_accuracy [--csv PATH] [--out-dir bench/results]

For every row of ``measured-memory.csv`` the planner's per-GPU peak (max of first and last
pipeline rank) is compared with the measured nvidia-smi peak, and the 80 % rule's verdict with
the run's outcome (OOM or not). Writes ``memory_accuracy.json`` and ``memory_accuracy.md``.

How the rows are read (the CSV leaves these settings empty; the values below are BLOOM's
Megatron-DeepSpeed setup, bigscience tr11-176B-ml):

* architecture: GPT with GeLU MLP (ffn = 4h), LayerNorm, linear biases, ALiBi (no position
  table), tied embeddings, tokenizer vocabulary 250 680 (padded by Megatron to 250 880), dropout 0;
* ``--checkpoint-activations``: full recompute of every layer; no sequence parallel (it did not
  exist in Megatron-DeepSpeed then); no flash attention (2022, fused softmax);
* fp16 is treated as bf16; DeepSpeed ZeRO stage 1 as Megatron's distributed optimizer
  (fp32 master weights and Adam moments sharded over dp), plus what DeepSpeed holds that
  Megatron-Core does not: phases A/B keep fp16 gradients (2 bytes) and shard an fp32 gradient
  partition with the states (12 + 4 bytes over dp); phase C's "BF16 optimizer" keeps bf16
  gradients and a full fp32 accumulation buffer (2 + 4 bytes); both allocate ZeRO's reduce and
  all-gather buckets (2 x 5e8 fp16 elements); DeepSpeed's pipeline engine keeps each stage's
  output tensor until backward (Megatron frees it after the send);
* the 2022 software stack (CUDA 11.x without lazy kernel loading) has a larger CUDA context;
* GPU: A100-SXM4-80GB, 80 GiB as nvidia-smi reports it, 8 per node.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from planner.layouts import RECOMPUTE_FULL, SHARD_OPTIMIZER, LayoutBatch
from planner.memory.estimate import GIB, MemoryOptions, estimate_memory
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, TrainingJob

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CSV = REPO_ROOT.parent / "shared" / "data" / "measured-memory.csv"
BLOOM_VOCAB = 250680  # BLOOM tokenizer; Megatron pads it to 250 880 at tp 2..8
# DeepSpeed ZeRO-1 reduce and all-gather buckets: 5e8 elements each in fp16 (DeepSpeed defaults)
DEEPSPEED_BUCKETS_BYTES = 2 * 5e8 * 2
# CUDA 11.x before lazy loading (11.7) loads every kernel of torch/cuBLAS/cuDNN at init:
# about 1.25 GiB per process on A100, against about 0.5 GiB with lazy loading
CUDA11_CONTEXT_BYTES = 1.25 * 2**30

A100_80GB = GPUSpec(
    name="a100-sxm4-80gb",
    hbm_bytes=80 * 2**30,
    hbm_bandwidth_bytes_per_s=2.039e12,
    peak_bf16_flop_per_s=312e12,
    peak_fp8_flop_per_s=None,
    intra_node_bandwidth_bytes_per_s=300e9,
    architecture="ampere",
)


def _int(row: dict[str, str], key: str, default: int) -> int:
    value = row.get(key, "").strip()
    return int(float(value)) if value else default


def row_inputs(
    row: dict[str, str],
) -> tuple[ModelSpec, ClusterSpec, TrainingJob, LayoutBatch, MemoryOptions]:
    """The planner's inputs for one CSV row (see the module docstring for the assumptions)."""
    hidden = _int(row, "hidden_size", 0)
    seq = _int(row, "seq_length", 2048)
    model = ModelSpec(
        name=row["model_name"] or row["row_id"],
        num_layers=_int(row, "num_layers", 0),
        hidden_size=hidden,
        ffn_hidden_size=_int(row, "ffn_hidden_size", 4 * hidden),
        num_attention_heads=_int(row, "num_attention_heads", 0),
        vocab_size=_int(row, "vocab_size", BLOOM_VOCAB),
        max_position_embeddings=seq,
        swiglu=False,
        normalization="LayerNorm",
        position_embedding_type="none",
        untie_embeddings_and_output_weights=False,
        add_bias_linear=True,
    )
    gpus = _int(row, "num_gpus", 8)
    cluster = ClusterSpec(name="bloom-a100-80gb", gpu=A100_80GB, num_gpus=gpus, gpus_per_node=8)
    job = TrainingJob(seq_length=seq, global_batch_size=_int(row, "global_batch_size", 2048))
    tp, pp, cp = _int(row, "tp", 1), _int(row, "pp", 1), _int(row, "cp", 1)
    batch = LayoutBatch.from_columns(
        tp=[tp],
        pp=[pp],
        vpp=[_int(row, "vpp", 1)],
        cp=[cp],
        dp=[_int(row, "dp", gpus // (tp * pp * cp))],
        micro_batch_size=[_int(row, "micro_batch_size", 1)],
        recompute=[RECOMPUTE_FULL],
        sequence_parallel=[False],
        optimizer_sharding=[SHARD_OPTIMIZER],
    )
    if "BF16 optimizer" in row.get("distributed_optimizer", ""):
        # phase C: bf16 gradients plus a full fp32 accumulation buffer, fp32 states sharded
        grad_bytes, state_bytes = 2 + 4, 12
    else:
        # ZeRO-1 fp16: fp16 gradients; the fp32 gradient partition is sharded with the states
        grad_bytes, state_bytes = 2, 12 + 4
    options = MemoryOptions(
        flash_attention=False,
        grad_dtype_bytes=grad_bytes,
        optimizer_state_bytes=state_bytes,
        dp_bucket_bytes=DEEPSPEED_BUCKETS_BYTES,
        keep_stage_outputs=True,
        cuda_context_bytes=CUDA11_CONTEXT_BYTES,
    )
    return model, cluster, job, batch, options


def evaluate_rows(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    results = []
    for row in rows:
        model, cluster, job, batch, options = row_inputs(row)
        est = estimate_memory(model, cluster, job, batch, options)
        measured = row.get("peak_memory_gb", "").strip()
        results.append(
            {
                "row_id": row["row_id"],
                "sweep_id": row["sweep_id"],
                "layout": batch.layout(0).to_dict(),
                "predicted_gib": round(float(est.total_bytes[0]) / GIB, 3),
                "worst_stage": ["first", "last"][int(est.worst_stage[0])],
                "terms_gib": {k: round(float(v[0]) / GIB, 3) for k, v in est.terms.items()},
                "measured_gib": float(measured) if measured else None,
                "oom": row.get("oom", "").strip().lower() == "yes",
                "predicted_feasible": bool(est.fits[0]),
            }
        )
    return results


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [
        (r["predicted_gib"] - r["measured_gib"]) / r["measured_gib"] * 100
        for r in results
        if r["measured_gib"] is not None
    ]
    abs_err = sorted(abs(e) for e in errors)
    ran = [r for r in results if not r["oom"]]
    oom = [r for r in results if r["oom"]]
    oom_called_feasible = sum(r["predicted_feasible"] for r in oom)
    ran_called_infeasible = sum(not r["predicted_feasible"] for r in ran)
    return {
        "rows": len(results),
        "rows_with_peak": len(errors),
        "median_abs_pct_error": round(statistics.median(abs_err), 2) if abs_err else None,
        "p90_abs_pct_error": round(float(np.percentile(abs_err, 90)), 2) if abs_err else None,
        "median_signed_pct_error": round(statistics.median(errors), 2) if errors else None,
        "confusion": {
            "oom_called_infeasible": len(oom) - oom_called_feasible,
            "oom_called_feasible": oom_called_feasible,
            "ran_called_feasible": len(ran) - ran_called_infeasible,
            "ran_called_infeasible": ran_called_infeasible,
        },
        "ran_called_infeasible_rate": round(ran_called_infeasible / len(ran), 4) if ran else None,
        "ran_above_threshold": sum(
            r["measured_gib"] is not None and r["measured_gib"] > 0.8 * 80 for r in ran
        ),
        "min_measured_of_ran_called_infeasible_gib": min(
            (r["measured_gib"] for r in ran if not r["predicted_feasible"] and r["measured_gib"]),
            default=None,
        ),
    }


def render_markdown(summary: dict[str, Any], results: list[dict[str, Any]]) -> str:
    c = summary["confusion"]
    lines = [
        "# Memory estimator vs BLOOM-176B pre-study (A100-80GB, nvidia-smi peaks)",
        "",
        "Generated by `python -m bench.memory_accuracy`; assumptions in the module docstring.",
        "",
        f"- rows: {summary['rows']} ({summary['rows_with_peak']} with a measured peak)",
        f"- peak error: median {summary['median_abs_pct_error']} %, "
        f"p90 {summary['p90_abs_pct_error']} % (signed median "
        f"{summary['median_signed_pct_error']} %)",
        f"- OOM runs called feasible: **{c['oom_called_feasible']}** (must be 0); "
        f"OOM runs called infeasible: {c['oom_called_infeasible']}",
        f"- runs that ran called infeasible: {c['ran_called_infeasible']} of "
        f"{c['ran_called_infeasible'] + c['ran_called_feasible']} "
        f"({summary['ran_called_infeasible_rate']:.1%}, target <= 10 %)",
        "",
        "Reading: nvidia-smi includes the CUDA context and the caching allocator's reserve, so a",
        "prediction a few per cent under it is expected. "
        f"{summary['ran_above_threshold']} of the runs that ran show a measured peak above the",
        "80 % line; an estimator that tracks the measured peaks calls those infeasible, which is",
        "what drives the ran-called-infeasible rate here, not an over-estimate: lowest measured",
        f"peak among them: {summary['min_measured_of_ran_called_infeasible_gib']} GiB.",
        "",
        "| row | tp | pp | dp | mbs | measured GiB | predicted GiB | OOM | fits (80 %) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lay = r["layout"]
        measured = "" if r["measured_gib"] is None else f"{r['measured_gib']:.0f}"
        lines.append(
            f"| {r['row_id']} | {lay['tp']} | {lay['pp']} | {lay['dp']} | "
            f"{lay['micro_batch_size']} | {measured} | {r['predicted_gib']:.1f} | "
            f"{'yes' if r['oom'] else 'no'} | {'yes' if r['predicted_feasible'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    with args.csv.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    results = evaluate_rows(rows)
    summary = summarize(results)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"summary": summary, "rows": results}
    (args.out_dir / "memory_accuracy.json").write_text(json.dumps(payload, indent=2) + "\n")
    (args.out_dir / "memory_accuracy.md").write_text(render_markdown(summary, results))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
