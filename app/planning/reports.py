"""Typed results: one report per layout (layout, memory, performance, launch), the same JSON from
``POST /v1/evaluations``, ``GET /v1/plan-jobs/{id}/plans``, ``planner evaluate/plan --json`` and
the SDK.

The planner builds these documents (``planner.evaluate``, ``PlanResult.to_dict``); the models
here declare their shape for the OpenAPI document and give the SDK typed objects. Every model
keeps fields it does not declare (``extra="allow"``), so no number the planner adds is dropped
on the way out; ``raw`` on the SDK's objects is the JSON as received.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_OPEN = ConfigDict(extra="allow")


class LayoutRead(BaseModel):
    """A parallel layout, in Megatron-LM's terms."""

    model_config = _OPEN

    tp: int | None = None
    pp: int | None = None
    vpp: int | None = None
    cp: int | None = None
    ep: int | None = None
    etp: int | None = None
    dp: int | None = None
    micro_batch_size: int | None = None
    recompute: str | None = None
    sequence_parallel: bool | None = None
    optimizer_sharding: str | None = None
    moe_a2a_overlap: bool | None = None
    moe_dispatcher: str | None = None


class MemoryRead(BaseModel):
    """Per-GPU memory of the most loaded pipeline stage, in bytes."""

    model_config = _OPEN

    total_bytes: float | None = None
    capacity_bytes: float | None = None
    threshold: float | None = None
    limit_bytes: float | None = None
    fits: bool | None = None
    headroom_bytes: float | None = None
    worst_stage: str | None = None
    breakdown: dict[str, float | None] = Field(default_factory=dict)


class PerformanceRead(BaseModel):
    """Predicted step time and throughput, with each term of the step (seconds and shares)."""

    model_config = _OPEN

    step_time_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    model_tflops_per_gpu: float | None = None
    mfu: float | None = None
    breakdown: dict[str, float] = Field(default_factory=dict)
    shares: dict[str, float] = Field(default_factory=dict)
    # issue 12 item 9: the 10th-90th percentile band of leave-one-source-out residuals of the
    # layout's regime (models_db/intervals), and why the prediction extrapolates (empty: inside)
    tokens_per_s_per_gpu_interval: list[float] | None = None
    step_time_interval_s: list[float] | None = None
    extrapolation: list[str] | None = None


class LaunchRead(BaseModel):
    """The Megatron-LM launch: argv, the torchrun command line, environment, notes."""

    model_config = _OPEN

    args: list[str] = Field(default_factory=list)
    command: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class _Raw(BaseModel):
    model_config = _OPEN

    @property
    def raw(self) -> dict[str, Any]:
        """The JSON document as the service sent it (no field added or dropped)."""
        return self.model_dump(mode="json", exclude_unset=True)


class LayoutReport(_Raw):
    """One layout: Megatron's rules, memory, performance and launch flags."""

    model_config = _OPEN

    valid: bool | None = None
    violations: list[str] = Field(default_factory=list)
    layout: LayoutRead = Field(default_factory=LayoutRead)
    memory: MemoryRead | None = None
    performance: PerformanceRead | None = None
    megatron: LaunchRead | None = None
    objective: dict[str, Any] | None = None
    model: str | None = None
    gpu: str | None = None
    num_gpus: int | None = None


class PlanResult(_Raw):
    """The ranked plans of a search, what it searched, and why layouts were rejected."""

    model_config = _OPEN

    plans: list[LayoutReport] = Field(default_factory=list)
    search: dict[str, Any] = Field(default_factory=dict)
    rejections: dict[str, int] = Field(default_factory=dict)
    pareto: list[LayoutReport] | None = None
    model: str | None = None
    gpu: str | None = None
    funnel: dict[str, Any] | None = None
    """enumerated -> passed Megatron's rules -> fit in memory -> evaluated -> ranked."""
    infeasible: dict[str, Any] | None = None
    """When nothing fits: fewest GPUs, checked changes, nearest layouts, a fix per rule."""
    winner: dict[str, Any] | None = None
    """Why #1 beats #2, with its sentence."""
    alternative: dict[str, Any] | None = None
    """An inverse question that found nothing: the fewest GPUs that fit, with their plan."""


class ScalingPoint(BaseModel):
    model_config = _OPEN

    num_gpus: int
    feasible: bool
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    mfu: float | None = None
    step_time_s: float | None = None
    scaling_efficiency: float | None = None
    layout: LayoutRead | None = None
    megatron_command: str | None = None
    error: str | None = None


class ScalingCurve(_Raw):
    """The best plan at each GPU count, with scaling efficiency, time and cost."""

    model_config = _OPEN

    model: str | None = None
    gpu: str | None = None
    reference_num_gpus: int | None = None
    points: list[ScalingPoint] = Field(default_factory=list)
