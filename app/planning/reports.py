"""Typed results: one report per layout (layout, memory, performance, launch), the same JSON from
``POST /v1/evaluations``, ``GET /v1/plan-jobs/{id}/plans``, ``planner evaluate/plan --json``,
batch rows, the web pages and the SDK.

:mod:`app.planning.report_build` is the one place that builds them from the planner's results.
The per-layout models are strict (``extra="forbid"``, required where the planner always answers),
so a number the planner adds or drops fails a test instead of slipping through undeclared;
``raw`` on the SDK's objects is the JSON as received.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from app.planning.run_read import RunRead
from planner.layout_types import (
    CudaGraphs,
    GradReduceDtype,
    OffloadModule,
    OptimizerStateDtype,
    RecomputeModule,
)
from planner.specs import CpCommType, MoeDispatcher, OptimizerSharding, Recompute, SpecError

_STRICT = ConfigDict(extra="forbid")
InverseQuestion = Literal["seq_length", "micro_batch_size", "num_gpus"]


class LayoutRead(BaseModel):
    """A parallel layout with its memory settings, in Megatron-LM's terms (defaults resolved)."""

    model_config = _STRICT

    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    etp: int
    dp: int
    micro_batch_size: int
    recompute: Recompute
    sequence_parallel: bool
    optimizer_sharding: OptimizerSharding
    moe_a2a_overlap: bool | None
    moe_dispatcher: MoeDispatcher | None
    grad_reduce_dtype: GradReduceDtype
    optimizer_state_dtype: OptimizerStateDtype
    fp8_param_gather: bool | None
    recompute_modules: list[RecomputeModule] | None
    recompute_num_layers: int | None
    cuda_graphs: CudaGraphs
    activation_offload_layers: int
    optimizer_offload_fraction: float
    pipeline_layout: str | None
    activation_offload_modules: list[OffloadModule] | None = None
    cp_comm_type: CpCommType | None = None


class MemoryRead(BaseModel):
    """Per-GPU memory of the most loaded pipeline stage, in bytes (None where not finite)."""

    model_config = _STRICT

    total_bytes: float | None
    capacity_bytes: float | None
    threshold: float
    limit_bytes: float | None
    fits: bool
    utilization: float | None
    headroom_bytes: float | None
    worst_stage: Literal["first", "last", "middle"]
    """Where the most loaded GPU sits: "middle" (a pipeline_layout charges every rank) names
    no end, worst_rank says which rank."""
    first_stage_bytes: float | None
    last_stage_bytes: float | None
    breakdown: dict[str, float | None]
    worst_rank: int | None
    host_bytes: float | None
    host_fits: bool | None
    stage_bytes: list[float | None] | None = None
    """Every pipeline stage's bytes, first to last, where the planner reports them."""


class PerformanceRead(BaseModel):
    """Predicted step time and throughput, with each term of the step (seconds and shares)."""

    model_config = _STRICT

    step_time_s: float | None
    tokens_per_s_per_gpu: float | None
    model_tflops_per_gpu: float | None
    mfu: float | None
    breakdown: dict[str, float | None]
    shares: dict[str, float | None]
    # issue 12 item 9: the 80 % prediction band of leave-one-source-out residuals of the
    # layout's regime (models_db/intervals), and why the prediction extrapolates (empty: inside)
    tokens_per_s_per_gpu_interval: list[float] | None = None
    step_time_interval_s: list[float] | None = None
    interval: dict[str, Any] | None = None
    """The band's source: its percentiles, the regime and how many rows it rests on; when that
    is not the layout's own regime (``layout_regime``), ``fallback`` says why."""
    extrapolation: list[str] | None = None


class LaunchRead(BaseModel):
    """The Megatron-LM launch: argv, the torchrun command line, environment, notes."""

    model_config = _STRICT

    args: list[str]
    command: str
    env: dict[str, str]
    notes: list[str]


class ObjectiveRead(BaseModel):
    """What a plan was ranked by, its value, and the totals derived from it."""

    model_config = _STRICT

    kind: str
    value: float | None
    unit: str
    direction: str
    tokens_per_s: float
    num_gpus: int | None = None
    global_batch_size: int | None = None
    seq_length: int | None = None
    token_budget: float | None = None
    days: float | None = None
    gpu_hours: float | None = None
    usd: float | None = None


class _Raw(BaseModel):
    @property
    def raw(self) -> dict[str, Any]:
        """The JSON document (no field added or dropped)."""
        return self.model_dump(mode="json", exclude_unset=True)


class LayoutReport(_Raw):
    """One evaluated layout: Megatron's rules, memory, performance and launch flags."""

    model_config = _STRICT

    valid: bool
    violations: list[str]
    layout: LayoutRead
    memory: MemoryRead
    performance: PerformanceRead | None
    """None for a layout that breaks one of Megatron's rules."""
    megatron: LaunchRead | None
    model: str
    gpu: str
    num_gpus: int


class RankedPlan(_Raw):
    """One plan of a search: a feasible layout, what it costs, and how to launch it."""

    model_config = _STRICT

    layout: LayoutRead
    memory: MemoryRead
    performance: PerformanceRead
    objective: ObjectiveRead
    megatron: LaunchRead
    rank: int | None = None
    """Set where plans of several searches are merged (a fan-out)."""
    run: RunRead | None = None
    """The model, cluster description and job stack it was planned for (None: stored by an
    older version)."""


class SearchRead(BaseModel):
    """What a search looked at and how long each stage took."""

    model_config = _STRICT

    enumerated: int
    valid: int
    feasible: int
    evaluated: int
    proven_optimal: bool
    method: Literal["exhaustive", "tpe", "none", "fan-out"]
    trials: int
    scenarios: int
    seed: int | None = None
    """None for a fan-out, whose parts each have their own."""
    elapsed_s: float | None = None
    timings_s: dict[str, float] | None = None
    parts: int | None = None
    """Fan-out only: the searches it was split into, and how many of them succeeded."""
    parts_succeeded: int | None = None


class FanoutPart(BaseModel):
    """One search of a fan-out (one GPU count and global batch size)."""

    model_config = _STRICT

    id: str
    num_gpus: int | None
    global_batch_size: int | None
    status: str
    error: str | None


class PlanResult(_Raw):
    """The ranked plans of a search, what it searched, and why layouts were rejected."""

    model_config = _STRICT

    plans: list[RankedPlan]
    search: SearchRead
    rejections: dict[str, int]
    pareto: list[RankedPlan]
    model: str | None = None
    gpu: str | None = None
    parts: list[FanoutPart] | None = None
    funnel: dict[str, Any] | None = None
    """enumerated -> passed Megatron's rules -> fit in memory -> evaluated -> ranked."""
    infeasible: dict[str, Any] | None = None
    """When nothing fits: fewest GPUs, checked changes, nearest layouts, a fix per rule."""
    winner: dict[str, Any] | None = None
    """Why #1 beats #2, with its sentence."""


class InversePlan(RankedPlan):
    """A plan answering an inverse question, stating the value reached under the question's name
    (``"seq_length": 5120``); the other two stay None."""

    seq_length: int | None = None
    micro_batch_size: int | None = None
    num_gpus: int | None = None


class InverseSearchRead(BaseModel):
    """What an inverse question's search tried: how many values, and the layouts that fit at
    the value reached."""

    model_config = _STRICT

    inverse: InverseQuestion
    probes: int
    feasible: int


class InverseResult(_Raw):
    """The answer to an inverse question (``maximize`` seq_length or micro_batch_size,
    ``minimize`` num_gpus): the value reached, each value tried with how many layouts fit
    there, and the best plans at that value. A variant of :class:`PlanResult`."""

    model_config = _STRICT

    question: InverseQuestion
    value: int | None
    """None when no value fits (``rejections`` says why)."""
    probes: list[tuple[int, int]]
    """(value tried, feasible layouts there), in the order tried."""
    plans: list[InversePlan]
    search: InverseSearchRead
    rejections: dict[str, int]
    model: str | None = None
    gpu: str | None = None
    alternative: InversePlan | None = None
    """When no value fits: the best plan on the fewest GPUs of this type that fit (its
    ``num_gpus``; its ``seq_length`` the longest there for a seq_length question), with flags."""


PlanAnswer = PlanResult | InverseResult
"""What a plan request answers: ranked plans, or the answer to an inverse question."""
_PLAN_ANSWER: TypeAdapter[PlanAnswer] = TypeAdapter(PlanAnswer)


def plan_answer(data: dict[str, Any]) -> PlanAnswer:
    """A plan job's stored or received JSON as its typed answer (ValidationError if malformed)."""
    return _PLAN_ANSWER.validate_python(data)


class ScalingPoint(BaseModel):
    """The best plan at one GPU count (or why there is none), and what it means for a run."""

    model_config = _STRICT

    num_gpus: int
    feasible: bool
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    mfu: float | None = None
    step_time_s: float | None = None
    layout: LayoutRead | None = None
    megatron_command: str | None = None
    error: str | None = None
    scaling_efficiency: float | None = None
    """Tokens/s per GPU relative to the smallest count with a feasible layout."""
    speedup: float | None = None
    days: float | None = None
    """Given a token budget: days and GPU-hours to train, and the cost at a price per GPU-hour."""
    gpu_hours: float | None = None
    usd: float | None = None


class ScalingCurve(_Raw):
    """The best plan at each GPU count, with scaling efficiency, time and cost."""

    model_config = _STRICT

    model: str | None
    gpu: str | None
    seq_length: int | None
    global_batch_size: int | None
    token_budget: float | None
    usd_per_gpu_hour: float | None
    reference_num_gpus: int | None
    points: list[ScalingPoint]


class ErrorRead(BaseModel):
    model_config = _STRICT

    message: str
    field: str | None = None


class EvaluationFailure(_Raw):
    """In place of a report, for a request of a batch (``planner evaluate --input``) that could not
    be evaluated; the others still are."""

    model_config = _STRICT

    error: ErrorRead

    @classmethod
    def of(cls, exc: SpecError) -> EvaluationFailure:
        """The failure of a request that raised ``exc`` (its message and the field to fix)."""
        return cls(error=ErrorRead(message=exc.message, field=exc.field))
