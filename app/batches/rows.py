"""The rows of batch results, shared by ``planner batch`` (local) and ``/v1/batches`` (service).

One row per job and rank; a job that failed (or found nothing feasible) is one row with
``error`` filled in.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from app.planning.run_read import CLUSTER_FIELDS, JOB_FIELDS, JOB_STACK

if TYPE_CHECKING:
    from app.planning.reports import PlanAnswer
    from app.planning.run_read import RunRead

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
RUN_COLUMNS = ("model", "cluster", *CLUSTER_FIELDS, *JOB_FIELDS)
"""What the plan ran on, named as the input fields: the model, the cluster (the request's preset
or user cluster, if it named one) and its description as resolved, the job."""
STACK_COLUMNS = ("cp_comm_type", *JOB_STACK)
"""The stack settings not among the layout and memory columns (issue 12), as resolved."""
RESULT_COLUMNS = (
    "rank",
    "dp",
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
"""The output columns that are not input fields: ``planner batch`` ignores them when it reads an
output file back as jobs (dp follows from the GPU count and the other axes)."""
OUTPUT_COLUMNS = (
    "name",
    "rank",
    *RUN_COLUMNS,
    *LAYOUT_COLUMNS,
    *MEMORY_COLUMNS,
    *STACK_COLUMNS,
    *RESULT_COLUMNS[2:],
)


def rows_for(
    name: str, result: PlanAnswer | str, request: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """The rows of one job: its typed answer, or the error (a message) that stopped it.

    ``request`` (the job as submitted) gives the names the user wrote for the model and the
    cluster; the rest of the run's columns are what the plan was computed for (``plan.run``)."""
    from app.planning.reports import InverseResult

    if isinstance(result, str):
        yield {"name": name, "rank": "", **_input_cells(request or {}), "error": result}
        return
    if not result.plans:
        reasons = "; ".join(f"{n} x {r}" for r, n in result.rejections.items())
        inputs = _input_cells(request or {})
        yield {"name": name, "rank": "", **inputs, "error": f"{NO_FEASIBLE}: {reasons}"}
        return
    question = result.question if isinstance(result, InverseResult) else None
    for rank, plan in enumerate(result.plans, start=1):
        lay, perf, mem = plan.layout, plan.performance, plan.memory
        terms = mem.breakdown
        states = sum(
            terms.get(k) or 0.0 for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes")
        )
        yield {
            "name": name,
            "rank": rank,
            **_run_cells(plan.run, request or {}),
            **{k: _cell(getattr(lay, k)) for k in (*LAYOUT_COLUMNS, *MEMORY_COLUMNS)},
            "cp_comm_type": _cell(lay.cp_comm_type),
            **{
                k: getattr(plan, question)
                for k in INVERSE_COLUMNS
                if question and k.removesuffix("_reached") == question
            },
            "tokens_per_s_per_gpu": round(perf.tokens_per_s_per_gpu or 0.0, 1),
            "mfu": round(perf.mfu or 0.0, 4),
            "step_time_s": round(perf.step_time_s or 0.0, 4),
            "memory_total_gib": round((mem.total_bytes or 0.0) / GIB, 2),
            "memory_weights_optimizer_gib": round(states / GIB, 2),
            "memory_activations_gib": round((terms.get("activations_bytes") or 0.0) / GIB, 2),
            "bubble_share": round(perf.shares.get("bubble_share") or 0.0, 4),
            "megatron_command": plan.megatron.command,
            "error": "",
        }


def _input_cells(request: Mapping[str, Any]) -> dict[str, Any]:
    """The job's own cells on a row without a plan (an error, nothing fits), so the output read
    back as jobs asks the same question; an inline model or cluster object has no cell."""
    inputs = set(OUTPUT_COLUMNS) - set(RESULT_COLUMNS) - {"name"}
    stored = as_stored(request)
    return {k: _cell(v) for k, v in stored.items() if k in inputs and not isinstance(v, dict)}


def as_stored(request: Mapping[str, Any]) -> Mapping[str, Any]:
    """The job as the service stores it (parsed, its defaults filled: PlanJobService.submit),
    so a local row and the service's row of one job have the same cells: the raw job of
    ``planner batch`` (CSV text, defaults left out) and the stored request both come out so.
    A job that does not parse is kept as written (its row says why it failed)."""
    from app.batches.schemas import BatchJobCreate
    from app.planning.convert import expand_text_lists, parse_request
    from planner import SpecError

    try:
        parsed = parse_request(BatchJobCreate, expand_text_lists(request))
    except SpecError:  # RequestError too
        return request
    return parsed.model_dump(mode="json", exclude_none=True, exclude={"name"})


def _run_cells(run: RunRead | None, request: Mapping[str, Any]) -> dict[str, Any]:
    """The run's columns: the model and cluster as the request named them (a slug or a model
    file; an inline object is named by the model's name), the rest as the plan resolved them."""
    if run is None:  # a result stored by an older version
        return {}
    cells = {k: _cell(getattr(run, k)) for k in (*CLUSTER_FIELDS, *JOB_FIELDS, *JOB_STACK)}
    model = request.get("model")
    cluster = request.get("cluster")
    return {
        "model": model if isinstance(model, str) else run.model,
        "cluster": cluster if isinstance(cluster, str) else "",
        **cells,
    }


def rows_for_stored(
    name: str, stored: dict[str, Any], request: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """The rows of a job's stored JSON (``{"error": ...}`` for a job that did not succeed)."""
    from pydantic import ValidationError

    from app.planning.reports import plan_answer

    if "error" in stored:
        return rows_for(name, str(stored["error"]), request)
    try:
        return rows_for(name, plan_answer(stored), request)
    except ValidationError as exc:  # stored by an older version: say so, keep the job's JSON
        older = f"stored result has an older shape ({exc.error_count()} fields)"
        return rows_for(name, older, request)


def _cell(value: Any) -> Any:
    """A layout setting as a CSV cell: lists comma-joined, unset empty."""
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
