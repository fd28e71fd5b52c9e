"""The rows of batch results, shared by ``planner batch`` (local) and ``/v1/batches`` (service).

One row per job and rank; a job that failed (or found nothing feasible) is one row with
``error`` filled in.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

GIB = 2**30  # memory in GiB, as `planner plan` and `evaluate` show it
NO_FEASIBLE = "no feasible layout"
LAYOUT_COLUMNS = (
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "dp",
    "micro_batch_size",
    "recompute",
    "optimizer_sharding",
    "moe_a2a_overlap",
    "moe_dispatcher",
)
MEMORY_COLUMNS = (  # the layout's memory settings (issue 13), as the request names them
    "grad_reduce_dtype",
    "optimizer_state_dtype",
    "fp8_param_gather",
    "recompute_modules",
    "recompute_num_layers",
    "cuda_graphs",
    "activation_offload_layers",
    "optimizer_offload_fraction",
    "pipeline_layout",
    "activation_offload_modules",
)
INVERSE_COLUMNS = ("seq_length_reached", "micro_batch_size_reached", "num_gpus_reached")
OUTPUT_COLUMNS = (
    "name",
    "rank",
    *LAYOUT_COLUMNS,
    *MEMORY_COLUMNS,
    *INVERSE_COLUMNS,
    "tokens_per_s_per_gpu",
    "mfu",
    "step_time_s",
    "memory_total_gib",
    "memory_weights_optimizer_gib",
    "memory_activations_gib",
    "bubble_share",
    "megatron_command",
    "error",
)


def rows_for(name: str, result: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "error" in result:
        yield {"name": name, "rank": "", "error": result["error"]}
        return
    if not result["plans"]:
        reasons = "; ".join(f"{n} x {r}" for r, n in result.get("rejections", {}).items())
        yield {"name": name, "rank": "", "error": f"{NO_FEASIBLE}: {reasons}"}
        return
    for rank, plan in enumerate(result["plans"], start=1):
        lay, perf, mem = plan["layout"], plan["performance"], plan["memory"]
        terms = mem["breakdown"]
        states = sum(
            terms.get(k) or 0.0 for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes")
        )
        yield {
            "name": name,
            "rank": rank,
            **{k: lay.get(k, "") for k in LAYOUT_COLUMNS},  # results stored before a field existed
            **{k: _cell(lay.get(k)) for k in MEMORY_COLUMNS},
            **{
                k: plan.get(k.removesuffix("_reached"), "")
                for k in INVERSE_COLUMNS
                if k.removesuffix("_reached") == result.get("question")
            },
            "tokens_per_s_per_gpu": round(perf["tokens_per_s_per_gpu"], 1),
            "mfu": round(perf["mfu"], 4),
            "step_time_s": round(perf["step_time_s"], 4),
            "memory_total_gib": round(mem["total_bytes"] / GIB, 2),
            "memory_weights_optimizer_gib": round(states / GIB, 2),
            "memory_activations_gib": round((terms.get("activations_bytes") or 0.0) / GIB, 2),
            "bubble_share": round(perf.get("shares", {}).get("bubble_share") or 0.0, 4),
            "megatron_command": plan["megatron"]["command"],
            "error": "",
        }


def _cell(value: Any) -> Any:
    """A memory setting as a CSV cell: lists comma-joined, unset empty."""
    if value is None:
        return ""
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else value


def to_csv(rows: Iterable[dict[str, Any]]) -> str:
    """The rows as CSV text with the OUTPUT_COLUMNS header."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=OUTPUT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def outcome_counts(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Jobs planned, infeasible (searched, nothing fits) and failed (bad input or an error).

    Each job is either ranked rows starting at rank 1, or one row without a rank.
    """
    counts = {"planned": 0, "infeasible": 0, "failed": 0}
    for row in rows:
        if row.get("rank") in (1, "1"):
            counts["planned"] += 1
        elif row.get("rank") in ("", None):
            infeasible = str(row.get("error", "")).startswith(NO_FEASIBLE)
            counts["infeasible" if infeasible else "failed"] += 1
    return counts


def outcome_line(counts: dict[str, int]) -> str:
    """``4 jobs: 2 planned, 1 infeasible (no layout fits), 1 failed``."""
    total = sum(counts.values())
    return (
        f"{total} job{'s' if total != 1 else ''}: {counts['planned']} planned, "
        f"{counts['infeasible']} infeasible (no layout fits), {counts['failed']} failed"
    )
