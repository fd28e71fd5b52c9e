"""Report documents of the real shape (:mod:`app.planning.reports`) for fake planning backends:
the API's strict response models reject anything else."""

from __future__ import annotations

from typing import Any

from app.planning.reports import LayoutReport, PlanResult

GIB = 2**30


def _layout(**axes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "tp": 1, "pp": 1, "vpp": 1, "cp": 1, "ep": 1, "etp": 1, "dp": 1, "micro_batch_size": 1,
        "recompute": "none", "sequence_parallel": False, "optimizer_sharding": "optimizer",
        "moe_a2a_overlap": None, "moe_dispatcher": None, "grad_reduce_dtype": "fp32",
        "optimizer_state_dtype": "fp32", "fp8_param_gather": None, "recompute_modules": None,
        "recompute_num_layers": None, "cuda_graphs": "none", "activation_offload_layers": 0,
        "optimizer_offload_fraction": 0.0, "pipeline_layout": None,
    }  # fmt: skip
    return {**base, **axes, "etp": axes.get("etp", axes.get("tp", 1))}


def _memory(total: float = 40 * GIB, capacity: float = 80 * GIB) -> dict[str, Any]:
    return {
        "total_bytes": total, "capacity_bytes": capacity, "threshold": 0.8,
        "limit_bytes": 0.8 * capacity, "fits": total <= 0.8 * capacity,
        "utilization": total / capacity, "headroom_bytes": 0.8 * capacity - total,
        "worst_stage": "first", "first_stage_bytes": total, "last_stage_bytes": total,
        "breakdown": {"weights": total}, "worst_rank": None, "host_bytes": None, "host_fits": None,
    }  # fmt: skip


def _performance(step: float = 1.0) -> dict[str, Any]:
    return {
        "step_time_s": step, "tokens_per_s_per_gpu": 4000.0 / step,
        "model_tflops_per_gpu": 400.0 / step, "mfu": 0.4 / step,
        "breakdown": {"compute_s": step}, "shares": {"compute_share": 1.0},
    }  # fmt: skip


LAUNCH = {
    "args": ["--tensor-model-parallel-size", "1"],
    "command": "torchrun",
    "env": {},
    "notes": [],
}


def layout_report_doc(
    *, model: str, gpu: str, num_gpus: int, valid: bool = True, **axes: Any
) -> dict[str, Any]:
    doc = {
        "valid": valid,
        "violations": [] if valid else ["num_gpus is not a multiple of tp*pp*cp"],
        "layout": _layout(**axes),
        "memory": _memory(),
        "performance": _performance() if valid else None,
        "megatron": LAUNCH if valid else None,
        "model": model,
        "gpu": gpu,
        "num_gpus": num_gpus,
    }
    return LayoutReport.model_validate(doc).model_dump(mode="json")


def plan_doc(
    *,
    step_time_s: float = 1.0,
    value: float = 4000.0,
    memory: dict[str, Any] | None = None,
    command: str = "torchrun",
    **axes: Any,
) -> dict[str, Any]:
    """One ranked plan; ``axes`` set layout fields, the rest have plausible values."""
    return {
        "layout": _layout(**axes),
        "memory": {**_memory(), **(memory or {})},
        "performance": _performance(step_time_s),
        "objective": {
            "kind": "throughput",
            "value": value,
            "unit": "tokens/s",
            "direction": "maximize",
            "tokens_per_s": value,
        },
        "megatron": {**LAUNCH, "command": command},
    }


def plan_result_doc(
    layouts: list[dict[str, Any]],
    *,
    model: str = "llama3.1-70b",
    gpu: str = "h100-sxm-80gb",
    rejections: dict[str, int] | None = None,
    **search_stats: Any,
) -> dict[str, Any]:
    """A search result; each of ``layouts`` is the keyword arguments of :func:`plan_doc`."""
    search = {
        "enumerated": 10, "valid": 5, "feasible": 3, "evaluated": 2, "proven_optimal": True,
        "method": "exhaustive", "seed": 0, "trials": 2, "scenarios": 1, "elapsed_s": 0.1,
        "timings_s": {}, **search_stats,
    }  # fmt: skip
    doc = {
        "plans": [plan_doc(**axes) for axes in layouts],
        "search": search,
        "rejections": rejections or {},
        "pareto": [],
        "model": model,
        "gpu": gpu,
    }
    return PlanResult.model_validate(doc).model_dump(mode="json")
