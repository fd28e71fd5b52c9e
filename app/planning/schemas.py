"""Schemas of evaluations and plan jobs.

Field names are the request fields of ``app.planning.compute`` (the same as the CLI's options);
every number has bounds so that no request can ask for an absurd amount of work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.catalog.network import NetworkFields
from app.core.bounds import check_spec_numbers
from app.core.schemas import Page, SlugRef
from app.planning.memory_fields import MemoryEvaluationFields, MemoryPlanFields
from app.planning.stack_fields import StackFields

Status = Literal["queued", "running", "succeeded", "failed", "cancelled"]
FINISHED = ("succeeded", "failed", "cancelled")
"""The statuses a plan job ends in."""
MAX_GPUS = 65_536
"""The most GPUs one request may name (every interface: API, CLI, batch rows, web form)."""
DEFAULT_MAX_TRIALS = 500
"""Trials of the sampled search: the planner's own default (``SearchBudget.max_trials``)."""
NETWORK_FIELDS = (
    "inter_node_bandwidth_bytes_per_s",
    "inter_node_latency_s",
    "intra_node_latency_s",
    *NetworkFields.model_fields,  # the cluster description: NICs, their rate, the topology
)
Recompute = Literal["none", "selective", "full"]
Sharding = Literal["none", "optimizer", "full"]
Dispatcher = Literal["alltoall", "flex"]
Precision = Literal["bf16", "fp8", "fp16"]
Objective = Literal["throughput", "time_to_train", "cost"]

ModelRef = Annotated[
    SlugRef | dict[str, Any],
    Field(
        description="catalog slug (built-in or user-defined), an inline ModelSpec object, or a "
        "Hugging Face config.json object",
        examples=["llama3.1-70b"],
    ),
]
Axis = Annotated[int, Field(ge=1, le=1024)]
AxisOrList = Axis | Annotated[list[Axis], Field(min_length=1, max_length=64)]

EVALUATION_EXAMPLE: dict[str, Any] = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "gpus_per_node": 8,
    "seq_length": 8192,
    "global_batch_size": 128,
    "precision": "bf16",
    "tp": 8,
    "pp": 4,
    "vpp": 5,
    "micro_batch_size": 1,
    "recompute": "selective",
    "optimizer_sharding": "optimizer",
}
PLAN_EXAMPLE: dict[str, Any] = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "gpus_per_node": 8,
    "seq_length": 8192,
    "global_batch_size": 128,
    "precision": "bf16",
    "objective": "throughput",
    "top_k": 5,
}


DISPATCHER_HELP = (
    "MoE token dispatcher: alltoall (NCCL) or flex (DeepEP, one copy per destination node); "
    "null = flex where the expert group spans nodes on Hopper/Blackwell"
)
A2A_OVERLAP_HELP = (
    "MoE all-to-all overlap (--overlap-moe-expert-parallel-comm): null = on where Megatron "
    "allows it, false = off, true = on"
)


class _Common(StackFields, NetworkFields):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN: "finite number"

    model: ModelRef
    gpu: SlugRef | dict[str, Any] | None = Field(
        default=None,
        description="GPU slug or alias (h100), or an inline object of GPUSpec fields; "
        "default: the cluster's",
    )
    cluster: SlugRef | None = Field(
        default=None,
        description="cluster preset slug: sets gpu and gpus_per_node, and its newest calibration "
        "becomes the performance profile",
    )
    gpu_memory_gib: float | None = Field(default=None, ge=1, le=4096)
    gpus_per_node: int | None = Field(default=None, ge=1, le=576)
    seq_length: int = Field(ge=1, le=1_048_576)
    precision: Precision = "bf16"
    memory_threshold: float = Field(default=0.8, ge=0.05, le=1.0)
    inter_node_bandwidth_bytes_per_s: float | None = Field(
        default=None, ge=1e-9, le=1e15, description="a user cluster's network: per GPU"
    )
    inter_node_latency_s: float | None = Field(default=None, ge=1e-9, le=1e15)
    intra_node_latency_s: float | None = Field(default=None, ge=1e-9, le=1e15)

    @field_validator("model")
    @classmethod
    def _bounded_model(cls, value: Any) -> Any:
        return check_spec_numbers(value)


class EvaluationRequest(MemoryEvaluationFields, _Common):
    """One layout to check against Megatron's rules, memory and the performance model."""

    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, json_schema_extra={"examples": [EVALUATION_EXAMPLE]}
    )

    num_gpus: int = Field(ge=1, le=MAX_GPUS)
    global_batch_size: int = Field(ge=1, le=16_777_216)
    tp: Axis = 1
    pp: Axis = 1
    vpp: Axis = 1
    cp: Axis = 1
    ep: int = Field(default=1, ge=1, le=4096)
    etp: Axis | None = None
    micro_batch_size: int = Field(default=1, ge=1, le=65_536)
    recompute: Recompute = "none"
    sequence_parallel: bool | None = None
    optimizer_sharding: Sharding = "optimizer"
    moe_a2a_overlap: bool | None = Field(default=None, description=A2A_OVERLAP_HELP)
    moe_dispatcher: Dispatcher | None = Field(default=None, description=DISPATCHER_HELP)


class PlanJobCreate(MemoryPlanFields, _Common):
    """A search for the best layouts; axes given here are fixed, the rest are searched."""

    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, json_schema_extra={"examples": [PLAN_EXAMPLE]}
    )

    seq_length: int | None = Field(  # type: ignore[assignment]
        default=None,
        ge=1,
        le=1_048_576,
        description="tokens per sequence (required); with maximize=seq_length the upper limit "
        "(default: the model's max_position_embeddings)",
    )
    num_gpus: int | None = Field(default=None, ge=1, le=MAX_GPUS)
    num_gpus_options: list[Annotated[int, Field(ge=1, le=MAX_GPUS)]] | None = Field(
        default=None, min_length=1, max_length=64
    )
    global_batch_size: int | None = Field(default=None, ge=1, le=16_777_216)
    global_batch_size_options: list[Annotated[int, Field(ge=1, le=16_777_216)]] | None = Field(
        default=None, min_length=1, max_length=64
    )
    tp: AxisOrList | None = None
    pp: AxisOrList | None = None
    vpp: AxisOrList | None = None
    cp: AxisOrList | None = None
    ep: AxisOrList | None = None
    etp: AxisOrList | None = None
    micro_batch_size: AxisOrList | None = None
    max_tp: Axis | None = None
    max_pp: Axis | None = None
    max_vpp: Axis | None = None
    max_cp: Axis | None = None
    max_ep: int | None = Field(default=None, ge=1, le=4096)
    max_micro_batch_size: int | None = Field(default=None, ge=1, le=65_536)
    recompute: list[Recompute] | None = Field(default=None, min_length=1, max_length=3)
    sequence_parallel: bool | None = None
    optimizer_sharding: list[Sharding] | None = Field(default=None, min_length=1, max_length=3)
    moe_a2a_overlap: bool | None = Field(default=None, description=A2A_OVERLAP_HELP)
    moe_dispatcher: Dispatcher | None = Field(default=None, description=DISPATCHER_HELP)
    objective: Objective = "throughput"
    token_budget: float | None = Field(default=None, ge=1, le=1e16)
    usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=1e4)  # 0: no price at all
    top_k: int = Field(default=10, ge=1, le=1000)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    max_trials: int = Field(default=DEFAULT_MAX_TRIALS, ge=1, le=1_000_000)
    exhaustive: bool = False
    pareto: bool = False


class PlanJobRead(BaseModel):
    id: str
    status: Status
    progress: float = Field(description="0..1")
    layouts_evaluated: int
    layouts_total: int | None
    attempts: int
    cancel_requested: bool
    error: str | None
    request: dict[str, Any]
    resolved: dict[str, Any] = Field(
        description="what the job runs with: specs resolved from the catalog and the profile"
    )
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None
    links: dict[str, str]


class PlanJobPage(Page):
    items: list[PlanJobRead]


MAX_SCALING_TRIALS = 5000
"""Sampled trials per GPU count of a synchronous scaling curve (a few seconds of CPU)."""
MAX_SCALING_POINTS = 24
"""GPU counts of one scaling curve."""
SCALING_EXAMPLE: dict[str, Any] = {
    **{k: v for k, v in PLAN_EXAMPLE.items() if k not in ("num_gpus", "top_k")},
    "num_gpus_options": [64, 128, 256, 512],
    "global_batch_size": 512,
    "token_budget": 1e12,
    "usd_per_gpu_hour": 2.5,
}


class ScalingCurveCreate(PlanJobCreate):
    """A plan request over a range of GPU counts (``num_gpus_options``), plus the run's size."""

    num_gpus_options: list[Annotated[int, Field(ge=1, le=MAX_GPUS)]] | None = Field(
        default=None, min_length=1, max_length=MAX_SCALING_POINTS
    )
    max_trials: int = Field(default=DEFAULT_MAX_TRIALS, ge=1, le=MAX_SCALING_TRIALS)
    seq_length: int = Field(ge=1, le=1_048_576)

    @field_validator("num_gpus", mode="before")
    @classmethod
    def _one_count(cls, value: Any) -> Any:
        """A range or list here is the curve's counts in the wrong field: say which field."""
        if isinstance(value, list) or (isinstance(value, str) and not value.strip().isdigit()):
            raise ValueError(
                f"num_gpus is one GPU count; give the curve's counts as num_gpus_options, "
                f"a list such as [16, 32, 64] (got {value!r})"
            )
        return value

    @field_validator("maximize", "minimize")
    @classmethod
    def _no_inverse_question(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("a scaling curve ranks layouts per GPU count; ask it with plan")
        return value
