"""CLI options of the memory settings and inverse questions (issue 13), named as the request's
fields (``--grad-reduce-dtype`` is ``grad_reduce_dtype``), for ``planner evaluate`` and ``plan``.

Lists are comma-separated (``--recompute-modules core_attn,mlp``); the inverse questions take the
hyphenated words of the issue (``--maximize seq-length``, ``--minimize num-gpus``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

Opt = typer.Option
GradDtypeOpt = Annotated[
    str | None, Opt(help="Gradient reduce dtype: fp32 or bf16 (plan: a list fp32,bf16).")
]
StateDtypeOpt = Annotated[
    str | None, Opt(help="Adam moment dtype: fp32 or bf16 (plan: a list fp32,bf16).")
]
Fp8GatherOpt = Annotated[
    bool | None,
    Opt("--fp8-param-gather/--no-fp8-param-gather", help="FP8 weights only (default: auto)."),
]
ModulesOpt = Annotated[
    str | None,
    Opt(help="Selective recompute modules: core_attn,mlp,moe_act,layernorm,mla_up_proj,moe,..."),
]
NumLayersOpt = Annotated[int | None, Opt(help="Full recompute: first N layers per chunk.")]
GraphsOpt = Annotated[
    str | None,
    Opt(
        help="CUDA graphs: none, partial or full_iteration (plan: also auto, the default: "
        "the planner chooses)."
    ),
]
ActOffloadOpt = Annotated[int | None, Opt(help="Activations of the first N layers on the host.")]
OptOffloadOpt = Annotated[
    str | None, Opt(help="Share of the optimizer state on the host, 0..1 (plan: a list 0,0.5,1).")
]
OffloadModulesOpt = Annotated[
    str | None,
    Opt(
        help="Fine-grained activation offload modules: attn_norm,qkv_linear,core_attn,"
        "attn_proj,mlp_norm,expert_fc1,moe_act."
    ),
]
SearchOffloadOpt = Annotated[
    bool, Opt(help="Let the search choose activation offload (the modules given, or all).")
]
LayoutOpt = Annotated[
    str | None, Opt(help="--pipeline-model-parallel-layout string, e.g. 'Et*8|t*8|t*8|t*8L'.")
]
NumericsOpt = Annotated[
    bool, Opt(help="Let the search choose bf16 gradient reduce and bf16 Adam moments.")
]
SearchModulesOpt = Annotated[bool, Opt(help="Also try the recompute module sets of NVIDIA.")]
AutoLayoutOpt = Annotated[bool, Opt(help="Balanced layout strings where no split exists.")]
MaximizeOpt = Annotated[
    str | None, Opt(help="Inverse question: seq-length or micro-batch-size that fits.")
]
MinimizeOpt = Annotated[str | None, Opt(help="Inverse question: num-gpus (fewest that fit).")]


def cli_memory_values(data: dict[str, Any], *, lists: bool) -> dict[str, Any]:
    """The flags' text as request values: hyphenated questions, comma lists (``lists`` for a
    plan's searched settings; an evaluation takes one value each)."""
    out = dict(data)
    for name in ("maximize", "minimize"):
        if isinstance(out.get(name), str):
            out[name] = out[name].strip().replace("-", "_")
    for name in ("recompute_modules", "activation_offload_modules"):
        if isinstance(out.get(name), str):
            out[name] = [m.strip() for m in out[name].split(",") if m.strip()]
    if not lists and isinstance(out.get("optimizer_offload_fraction"), str):
        out["optimizer_offload_fraction"] = out["optimizer_offload_fraction"].strip()
    return out
