"""Megatron-LM flags of the memory settings (issue 13), and their parser.

Sources: megatron-facts §1.2, §1.6-§1.8; mechanisms-facts §3.4, §6.

| setting | flags |
| --- | --- |
| pipeline_layout | ``--pipeline-model-parallel-layout`` (alone: rule 7 forbids other VPP flags) |
| recompute_modules | ``--recompute-granularity selective --recompute-modules ...`` |
| recompute_num_layers | ``--recompute-granularity full --recompute-method block`` + N |
| grad_reduce_dtype bf16 | ``--grad-reduce-in-bf16`` |
| optimizer_state_dtype bf16 | ``--use-precision-aware-optimizer --exp-avg(-sq)-dtype bf16`` |
| optimizer_offload_fraction | ``--optimizer-cpu-offload --optimizer-offload-fraction f`` |
| activation_offload_layers | ``--cpu-offloading-num-layers N`` |
| activation_offload_modules | ``--fine-grained-activation-offloading --offload-modules ...`` |
| cuda_graphs | by core release: :mod:`planner.megatron.version_flags` |
| fp8_param_gather | ``--fp8-param-gather`` |
| precision fp16 | ``--fp16`` (dynamic loss scaling, Megatron's default) instead of ``--bf16`` |
"""

from __future__ import annotations

import argparse
from typing import Any

from planner.layout_types import OFFLOAD_MODULE_CHOICES, RECOMPUTE_MODULE_CHOICES
from planner.model.pipeline_layout import parse_pipeline_layout
from planner.space import comm_flags
from planner.specs import Layout, ModelSpec

__all__ = [
    "add_memory_arguments",
    "fp8_param_gather_on",
    "layout_vpp",
    "memory_args",
    "parsed_memory_fields",
    "recompute_args",
]


def fp8_param_gather_on(precision: str, lay: Layout) -> bool:
    """The field where set, else NVIDIA's recipes: on for fp8 with dist-opt or FSDP."""
    if precision != "fp8":
        return False
    if lay.fp8_param_gather is not None:
        return lay.fp8_param_gather
    return bool(comm_flags.fp8_param_gather(precision, lay.optimizer_sharding))


def recompute_args(lay: Layout) -> list[str]:
    if lay.recompute == "selective":
        args = ["--recompute-granularity", "selective"]
        modules = lay.recompute_modules or ("core_attn",)
        if modules != ("core_attn",):  # Megatron's default needs no flag (core >= 0.12 has it)
            args += ["--recompute-modules", *modules]
        return args
    if lay.recompute == "full":
        # full needs a method and a layer count (megatron-facts rule 48)
        if lay.recompute_num_layers:
            return ["--recompute-granularity", "full", "--recompute-method", "block",
                    "--recompute-num-layers", str(lay.recompute_num_layers)]  # fmt: skip
        return ["--recompute-granularity", "full", "--recompute-method", "uniform",
                "--recompute-num-layers", "1"]  # fmt: skip
    return []


def memory_args(model: ModelSpec, precision: str, lay: Layout) -> list[str]:
    """Precision, optimizer and offload flags of one resolved layout."""
    args = ["--fp16" if precision == "fp16" else "--bf16"]
    if lay.grad_reduce_dtype == "bf16":
        args.append("--grad-reduce-in-bf16")
    aware = lay.optimizer_state_dtype == "bf16" or lay.optimizer_offload_fraction > 0
    if aware:
        args.append("--use-precision-aware-optimizer")  # TE FusedAdam (§6.6; rule 59)
    if lay.optimizer_state_dtype == "bf16":
        args += ["--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"]
    if lay.optimizer_offload_fraction > 0:
        fraction = f"{lay.optimizer_offload_fraction:g}"
        args += ["--optimizer-cpu-offload", "--optimizer-offload-fraction", fraction]
        args.append("--overlap-cpu-optimizer-d2h-h2d")
    if lay.activation_offload_layers:
        args += ["--cpu-offloading-num-layers", str(lay.activation_offload_layers)]
    if lay.activation_offload_modules:
        # core >= 0.16; the launch script exports NVTE_CPU_OFFLOAD_V1=1 (rule 51)
        args += ["--fine-grained-activation-offloading", "--offload-modules",
                 *lay.activation_offload_modules]  # fmt: skip
    return args  # the CUDA-graph flags depend on the core: planner.megatron.version_flags


def add_memory_arguments(p: argparse.ArgumentParser) -> None:
    """Register the flags :func:`memory_args` emits (and the pipeline layout) on a parser."""
    p.add_argument("--pipeline-model-parallel-layout", default=None)
    p.add_argument("--recompute-modules", nargs="+", default=None)
    for flag in ("--fp16", "--grad-reduce-in-bf16", "--use-precision-aware-optimizer",
                 "--optimizer-cpu-offload", "--overlap-cpu-optimizer-d2h-h2d",
                 "--no-check-for-nan-in-loss-and-grad"):  # fmt: skip
        p.add_argument(flag, action="store_true")
    for flag in ("--exp-avg-dtype", "--exp-avg-sq-dtype", "--main-grads-dtype"):
        p.add_argument(flag, choices=("fp32", "fp16", "bf16", "fp8"), default="fp32")
    p.add_argument("--optimizer-offload-fraction", type=float, default=1.0)
    p.add_argument("--cpu-offloading-num-layers", type=int, default=0)
    p.add_argument("--cuda-graph-impl", default="none",
                   choices=("none", "local", "transformer_engine", "full_iteration"))  # fmt: skip
    p.add_argument("--cuda-graph-scope", nargs="+", default=None)  # core 0.12-0.17
    p.add_argument("--cuda-graph-modules", nargs="+", default=None)  # core >= 0.18
    p.add_argument("--external-cuda-graph", action="store_true")  # core 0.12-0.14: TE graphs
    p.add_argument("--enable-cuda-graph", action="store_true")  # core 0.11-0.14: local graphs
    p.add_argument("--fine-grained-activation-offloading", action="store_true")
    p.add_argument("--offload-modules", nargs="+", default=None)


def parsed_memory_fields(ns: argparse.Namespace, precision: str) -> dict[str, Any]:
    """Layout keyword arguments for the memory settings in a parsed argv."""
    selective = ns.recompute_granularity == "selective" or ns.recompute_activations
    modules = None
    if selective and ns.recompute_modules:  # Megatron's order; the Layout refuses unknown ones
        known = tuple(m for m in RECOMPUTE_MODULE_CHOICES if m in ns.recompute_modules)
        modules = known + tuple(m for m in ns.recompute_modules if m not in known)
    block = ns.recompute_granularity == "full" and ns.recompute_method == "block"
    graphs = "none"
    if ns.cuda_graph_impl == "full_iteration" or "full_iteration" in (ns.cuda_graph_scope or ()):
        graphs = "full_iteration"
    elif (
        ns.cuda_graph_impl in ("transformer_engine", "local")
        or ns.external_cuda_graph
        or ns.enable_cuda_graph
    ):
        graphs = "partial"
    fields: dict[str, Any] = {
        "grad_reduce_dtype": "bf16"
        if ns.grad_reduce_in_bf16 or ns.main_grads_dtype == "bf16"
        else "fp32",
        "optimizer_state_dtype": "bf16"
        if ns.use_precision_aware_optimizer and ns.exp_avg_dtype == "bf16"
        else "fp32",
        "recompute_modules": modules,
        "recompute_num_layers": ns.recompute_num_layers if block else None,
        "cuda_graphs": graphs,
        "activation_offload_layers": ns.cpu_offloading_num_layers,
        "optimizer_offload_fraction": ns.optimizer_offload_fraction
        if ns.optimizer_cpu_offload
        else 0.0,
        "pipeline_layout": ns.pipeline_model_parallel_layout,
        "activation_offload_modules": _offload_modules(ns),
    }
    return fields


def _offload_modules(ns: argparse.Namespace) -> tuple[str, ...] | None:
    """The offloaded modules of an argv (Megatron's order; the Layout refuses unknown ones)."""
    if not ns.fine_grained_activation_offloading or not ns.offload_modules:
        return None
    modules = [m for part in ns.offload_modules for m in part.split(",") if m]
    known = tuple(m for m in OFFLOAD_MODULE_CHOICES if m in modules)
    return known + tuple(m for m in modules if m not in OFFLOAD_MODULE_CHOICES)


def layout_vpp(text: str | None, pp: int) -> int | None:
    """v = stages / p for a layout string (megatron-facts §1.2), None without one."""
    if text is None:
        return None
    return max(parse_pipeline_layout(text).num_stages // max(pp, 1), 1)
