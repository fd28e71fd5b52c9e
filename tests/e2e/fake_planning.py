"""A stand-in planning backend for web tests: canned results, the real request checks' shape.

It lets the pages be tested for what they show (and whether the job machinery carries the
result), independent of the planner's numbers, which have their own tests.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from app.planning.backend import PlanningBackend
from planner.specs import SpecError

GIB = 2**30
MEMORY_SETTINGS = {
    "moe_a2a_overlap": False, "moe_dispatcher": None, "grad_reduce_dtype": "fp32",
    "optimizer_state_dtype": "fp32", "fp8_param_gather": None, "recompute_modules": None,
    "recompute_num_layers": None, "cuda_graphs": "none", "activation_offload_layers": 0,
    "optimizer_offload_fraction": 0.0, "pipeline_layout": None,
}  # fmt: skip
KNOWN_MODELS = ("llama3.1-8b", "mixtral-8x22b")


def _plan(rank: int) -> dict[str, Any]:
    tp = (8, 4, 2)[rank % 3]
    step = 4.0 + rank
    capacity = 80 * GIB
    breakdown = {
        "weights_bytes": 10 * GIB,
        "gradients_bytes": 10 * GIB,
        "optimizer_bytes": 5 * GIB,
        "activations_bytes": (20 + rank) * GIB,
        "logits_bytes": 2 * GIB,
        "comm_buffers_bytes": 1 * GIB,
        "runtime_overhead_bytes": 3 * GIB,
    }
    total = sum(breakdown.values())
    perf = {
        "compute_s": step * 0.7,
        "tp_comm_s": step * 0.05,
        "dp_comm_s": step * 0.05,
        "bubble_s": step * 0.15,
        "optimizer_s": step * 0.05,
    }
    layout = {
        "tp": tp,
        "pp": 4,
        "vpp": 2,
        "cp": 1,
        "ep": 1,
        "etp": tp,
        "dp": 64 // (tp * 4),
        "micro_batch_size": 1,
        "recompute": "selective",
        "sequence_parallel": True,
        "optimizer_sharding": "optimizer",
        **MEMORY_SETTINGS,
    }
    prediction: dict[str, Any] = {}
    if rank == 0:  # the fidelity fields (issue 14 item 3): an interval and an extrapolation
        speed = 4_000_000 / step / 64
        prediction = {
            "tokens_per_s_per_gpu_interval": [0.9 * speed, 1.1 * speed],
            "step_time_interval_s": [0.9 * step, 1.15 * step],
            "extrapolation": ["seq_length 131072 is longer than any measured run (32768)"],
            # the shape of planner.calibration.intervals.uncertainty's block
            "interval": {
                "band": "80 % predictive band widened for a campaign the fit never saw: "
                "between-campaign sd 0.107 (log)",
                "regime": "dense/multi-node/cp=1/bf16",
                "layout_regime": "dense/multi-node/cp=1/bf16",
            },
        }
    return {
        "layout": layout,
        "memory": {
            "stage_bytes": [total, total - GIB, total - 2 * GIB, total - 3 * GIB],
            "total_bytes": total,
            "capacity_bytes": capacity,
            "threshold": 0.8,
            "limit_bytes": 0.8 * capacity,
            "fits": total <= 0.8 * capacity,
            "utilization": total / capacity,
            "headroom_bytes": 0.8 * capacity - total,
            "worst_stage": "first",
            "first_stage_bytes": total,
            "last_stage_bytes": total - 2 * GIB,
            "breakdown": breakdown,
            "worst_rank": None,
            "host_bytes": None,
            "host_fits": None,
        },
        "performance": {
            "step_time_s": step,
            "tokens_per_s_per_gpu": 4_000_000 / step / 64,
            "model_tflops_per_gpu": 400.0 / step,
            "mfu": 0.4 * 4 / step,
            "breakdown": perf,
            "shares": {k.removesuffix("_s") + "_share": v / step for k, v in perf.items()},
            **prediction,
        },
        "objective": {
            "kind": "throughput",
            "value": 4_000_000 / step,
            "unit": "tokens/s",
            "direction": "maximize",
            "tokens_per_s": 4_000_000 / step,
        },
        "megatron": {
            "args": [
                "--tensor-model-parallel-size",
                str(tp),
                "--pipeline-model-parallel-size",
                "4",
                "--num-layers-per-virtual-pipeline-stage",
                "4",
                "--sequence-parallel",
                "--recompute-granularity",
                "selective",
                "--use-distributed-optimizer",
            ],
            "command": f"torchrun --nproc-per-node 8 pretrain_gpt.py "
            f"--tensor-model-parallel-size {tp} --pipeline-model-parallel-size 4",
            "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"},
            "notes": [],
        },
    }


def canned_result(request: dict[str, Any]) -> dict[str, Any]:
    """A plan result of the real shape (app.planning.reports.PlanResult)."""
    plans = [_plan(i) for i in range(3)]
    over = _plan(0)
    return {
        "plans": plans,
        "search": {
            "enumerated": 400,
            "valid": 160,
            "feasible": 40,
            "evaluated": 120,
            "proven_optimal": True,
            "method": "exhaustive",
            "trials": 120,
            "scenarios": 1,
            "seed": 0,
            "elapsed_s": 0.2,
            "timings_s": {},
        },
        "rejections": {
            "needs more than 80 % of HBM (memory)": 70,
            "tp=16 exceeds GPUs per node 8": 10,
        },
        "pareto": [  # a point over the memory line (the scatter draws it hollow)
            {
                **over,
                "memory": {**over["memory"], "total_bytes": 90 * GIB, "fits": False},
                "performance": {**over["performance"], "tokens_per_s_per_gpu": 20_000.0},
            },
        ],
        "model": request.get("model") if isinstance(request.get("model"), str) else "pasted",
        "gpu": request.get("gpu"),
    }


def validate(request: dict[str, Any]) -> dict[str, Any]:
    model = request.get("model")
    if isinstance(model, str) and model not in KNOWN_MODELS:
        raise SpecError(f"unknown model {model!r}", field="model")
    if int(request.get("seq_length", 0)) < 1:
        raise SpecError(
            f"seq_length={request.get('seq_length')} must be at least 1", field="seq_length"
        )
    return {}


def fake_backend(gate: threading.Event | None = None, step_s: float = 0.0) -> PlanningBackend:
    """A backend whose searches report progress and, given a ``gate``, wait for it to open;
    ``step_s`` makes each of its ten steps take that long (a slow search, seen in a browser)."""

    def plan(
        request: dict[str, Any], *, profile: Any = None, progress: Any = None
    ) -> dict[str, Any]:
        for i in range(10):
            if progress is not None:
                progress(i, 10)
            if gate is not None and i == 5:
                gate.wait(30)
            time.sleep(step_s)
        return canned_result(request)

    return PlanningBackend(evaluate=lambda r, **k: {}, plan=plan, validate_plan=validate)


def catalog_source() -> dict[str, dict[str, dict[str, Any]]]:
    """The built-in catalog as the service seeds it (working around presets without to_dict)."""
    from app.catalog.service import builtin_specs

    try:
        return builtin_specs()
    except TypeError:
        import models_db
        from app.catalog.service import _jsonable

        out: dict[str, dict[str, dict[str, Any]]] = {"model": {}, "gpu": {}, "cluster": {}}
        for slug in models_db.list_models():
            out["model"][slug] = _jsonable(models_db.load_model(slug).to_dict())
        for slug in models_db.list_gpus():
            out["gpu"][slug] = _jsonable(models_db.load_gpu(slug).to_dict())
        keep = {
            "gpu",
            "gpus_per_node",
            "inter_node_bandwidth_bytes_per_s",
            "inter_node_latency_s",
            "intra_node_latency_s",
        }
        for slug in models_db.list_clusters():
            preset = dataclasses.asdict(models_db.load_cluster_preset(slug))
            out["cluster"][slug] = {k: v for k, v in preset.items() if k in keep}
        return out


def real_stack_available() -> bool:
    try:
        import app.planning.compute
        import app.planning.plan_request  # noqa: F401
    except ImportError:
        return False
    return True
