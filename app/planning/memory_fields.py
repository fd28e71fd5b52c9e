"""The memory-setting fields of the typed requests (issue 13), shared by every interface.

Each field has the name, values and meaning of the planner's (``planner.layout_types.
MemorySettings`` on a layout, ``planner.space.memory_axes.MemoryChoices`` in a search), so the
API, the CLI flags (``--grad-reduce-dtype``), ``--input`` JSON keys, batch CSV columns and the web
form all say the same thing. An evaluation fixes one value; a plan may list several for the
settings the search varies (``grad_reduce_dtype``, ``optimizer_state_dtype``,
``optimizer_offload_fraction``) and asks an inverse question with ``maximize`` / ``minimize``.
The planner validates the combinations (a pipeline layout's stage count, offload with pp=1) with
its own messages, each naming the field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from app.core.schemas import RequestModel
from planner.model.pipeline_layout import parse_pipeline_layout
from planner.specs import SpecError

GradReduceDtype = Literal["fp32", "bf16"]
OptimizerStateDtype = Literal["fp32", "bf16"]
CudaGraphs = Literal["none", "partial", "full_iteration"]
RecomputeModule = Literal[
    "core_attn", "mlp", "moe_act", "layernorm", "mla_up_proj", "moe", "shared_experts"
]
OffloadModule = Literal[
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"
]
Maximize = Literal["seq_length", "micro_batch_size"]
Minimize = Literal["num_gpus"]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]

GRAD_HELP = "gradient buffer and reduction dtype: fp32, or bf16 (--grad-reduce-in-bf16; numerics)"
STATE_HELP = "Adam moments: fp32, or bf16 (--use-precision-aware-optimizer, bf16 moments; numerics)"
FP8_GATHER_HELP = "--fp8-param-gather: null = on for fp8 jobs with a sharded optimizer"
MODULES_HELP = "--recompute-modules with recompute=selective; null = Megatron's core_attn"
NUM_LAYERS_HELP = "--recompute-num-layers (block method) with recompute=full; null = every layer"
GRAPHS_HELP = "CUDA graphs: none, partial (per-layer TE graphs) or full_iteration"
ACT_OFFLOAD_HELP = "--cpu-offloading-num-layers: activations of the first N layers on the host"
OPT_OFFLOAD_HELP = "--optimizer-offload-fraction: share of the optimizer state held on the host"
OFFLOAD_MODULES_HELP = (
    "--fine-grained-activation-offloading --offload-modules: module inputs kept on the host "
    "(attn_proj needs core_attn; expert_fc1/moe_act on MoE models); null = off"
)


def _layout_grammar(text: str) -> str:
    """A layout Megatron could accept for some model (grammar, one E first, one L last): a
    ValueError with the planner's message otherwise, which pydantic makes a 422 on the field."""
    try:
        parse_pipeline_layout(text).validate_grammar()
    except SpecError as exc:
        raise ValueError(exc.message) from None
    return text


LAYOUT_HELP = "--pipeline-model-parallel-layout, e.g. 'Et*8|t*8|t*8|t*8L' (pp x vpp stages)"


class _MemoryCommon(RequestModel):
    fp8_param_gather: bool | None = Field(default=None, description=FP8_GATHER_HELP)
    recompute_modules: list[RecomputeModule] | None = Field(
        default=None, min_length=1, max_length=7, description=MODULES_HELP
    )
    recompute_num_layers: int | None = Field(
        default=None, ge=1, le=1024, description=NUM_LAYERS_HELP
    )
    cuda_graphs: CudaGraphs = Field(default="none", description=GRAPHS_HELP)
    activation_offload_layers: int = Field(default=0, ge=0, le=1024, description=ACT_OFFLOAD_HELP)
    pipeline_layout: Annotated[str, AfterValidator(_layout_grammar)] | None = Field(
        default=None, min_length=1, max_length=8192, description=LAYOUT_HELP
    )
    activation_offload_modules: list[OffloadModule] | None = Field(
        default=None, min_length=1, max_length=7, description=OFFLOAD_MODULES_HELP
    )


class MemoryEvaluationFields(_MemoryCommon):
    """The memory settings of the one layout an evaluation checks."""

    grad_reduce_dtype: GradReduceDtype = Field(default="fp32", description=GRAD_HELP)
    optimizer_state_dtype: OptimizerStateDtype = Field(default="fp32", description=STATE_HELP)
    optimizer_offload_fraction: Fraction = Field(default=0.0, description=OPT_OFFLOAD_HELP)


class MemoryPlanFields(_MemoryCommon):
    """The memory settings of a search: fixed values, or the values the search may choose."""

    cuda_graphs: CudaGraphs | Literal["auto"] | None = Field(  # type: ignore[assignment]
        default=None,
        description=GRAPHS_HELP + "; null or auto = the planner chooses (the fastest mode that "
        "fits, where it gains at least 1 %): auto is the web form's and the CLI's spelling",
    )
    grad_reduce_dtype: list[GradReduceDtype] | None = Field(
        default=None,
        min_length=1,
        max_length=2,
        description=GRAD_HELP + "; null = fp32, or both with allow_numerics_changes",
    )
    optimizer_state_dtype: list[OptimizerStateDtype] | None = Field(
        default=None,
        min_length=1,
        max_length=2,
        description=STATE_HELP + "; null = fp32, or both with allow_numerics_changes",
    )
    allow_numerics_changes: bool = Field(
        default=False, description="let the search choose bf16 gradient reduce and bf16 moments"
    )
    search_recompute_modules: bool = Field(
        default=False, description="also try the recompute module sets of NVIDIA's recipes"
    )
    optimizer_offload_fraction: list[Fraction] | None = Field(
        default=None, min_length=1, max_length=11, description=OPT_OFFLOAD_HELP + "; values tried"
    )
    search_activation_offload: bool = Field(
        default=False,
        description="let the search choose between no activation offload and "
        "activation_offload_modules (or every module the model has when that is null)",
    )
    auto_pipeline_layout: bool = Field(
        default=False,
        description="give (pp, vpp) pairs without a standard split a balanced layout string",
    )
    maximize: Maximize | None = Field(
        default=None,
        description="inverse question: the longest seq_length or the largest micro_batch_size "
        "that fits; each plan states the value reached",
    )
    minimize: Minimize | None = Field(
        default=None,
        description="inverse question: the fewest num_gpus (up to num_gpus) on which a layout fits",
    )
