"""Plan requests: a ``PlanJobCreate`` into a search, and its result into the typed report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.planning.axis_rules import check_fixed_axes
from app.planning.convert import resolve_cluster, resolve_job, resolve_model
from app.planning.memory_request import INVERSE_SEQ_START, check_inverse, to_memory_choices
from app.planning.report_build import plan_report
from app.planning.reports import PlanAnswer
from app.planning.schemas import PlanJobCreate
from models_db.profiles import load_profile
from planner import (
    ClusterSpec,
    ModelSpec,
    Objective,
    PerformanceProfile,
    PlanResult,
    SearchBudget,
    SearchConstraints,
    SpecError,
    TrainingJob,
    plan,
)
from planner.search.infeasible import explain_infeasible
from planner.space.version_check import check_settings

Progress = Callable[[int, int], None]
AXES = ("tp", "pp", "vpp", "cp", "ep", "etp", "micro_batch_size")
MAX_AXES = ("max_tp", "max_pp", "max_vpp", "max_cp", "max_ep", "max_micro_batch_size")
EXHAUSTIVE_TRIALS = 1_000_000_000


def to_constraints(req: PlanJobCreate) -> SearchConstraints:
    """The axes a plan request fixes or bounds; the rest are searched."""
    kwargs: dict[str, Any] = {}
    for axis in AXES:
        value = getattr(req, axis)
        if value is not None:
            kwargs[axis] = tuple(sorted(set(value if isinstance(value, list) else [value])))
    for name in MAX_AXES:
        if getattr(req, name) is not None:
            kwargs[name] = getattr(req, name)
    if req.recompute is not None:
        kwargs["recompute"] = tuple(dict.fromkeys(req.recompute))
    if req.optimizer_sharding is not None:
        kwargs["optimizer_sharding"] = tuple(dict.fromkeys(req.optimizer_sharding))
    if req.sequence_parallel is not None:
        kwargs["sequence_parallel"] = (req.sequence_parallel,)
    return SearchConstraints(
        **kwargs,
        moe_a2a_overlap=req.moe_a2a_overlap,
        moe_dispatcher=req.moe_dispatcher,
        cp_comm_type=req.cp_comm_type,  # stack_fields' layout descriptor: None = searched
        memory=to_memory_choices(req),
    )


def check_plan_versions(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, c: SearchConstraints
) -> None:
    """A setting the plan request fixes and its Megatron-Core / TE lack: a 422 on the field
    (lists: when the stack has none of the values the search may try)."""
    m = c.memory
    check_settings(model, cluster, job, {
        "cp_comm_type": c.cp_comm_type, "moe_dispatcher": c.moe_dispatcher,
        "moe_a2a_overlap": c.moe_a2a_overlap, "cuda_graphs": m.cuda_graphs,
        "fp8_param_gather": m.fp8_param_gather,
        "activation_offload_layers": m.activation_offload_layers,
        "activation_offload_modules": m.activation_offload_modules,
        "optimizer_offload_fraction": m.optimizer_offload_fraction,
        "optimizer_state_dtype": m.optimizer_state_dtype,
        "recompute_modules": m.recompute_modules, "pipeline_layout": m.pipeline_layout,
    })  # fmt: skip


def to_objective(req: PlanJobCreate) -> Objective:
    kwargs: dict[str, Any] = {"kind": req.objective}
    if req.token_budget is not None:
        kwargs["token_budget"] = req.token_budget
    if req.usd_per_gpu_hour is not None:
        kwargs["usd_per_gpu_hour"] = req.usd_per_gpu_hour
    try:
        return Objective(**kwargs)
    except SpecError as exc:
        raise SpecError(exc.message, field=exc.field or "objective") from exc


@dataclass(frozen=True, slots=True)
class PreparedPlan:
    """Everything a plan request resolves to before the search runs."""

    model: ModelSpec
    clusters: list[ClusterSpec]
    jobs: list[TrainingJob]
    constraints: SearchConstraints
    objective: Objective
    budget: SearchBudget
    threshold: float
    top_k: int
    pareto: bool


def to_plan(req: PlanJobCreate, model: ModelSpec | None = None) -> PreparedPlan:
    """Resolve and validate a plan request without searching; SpecError names the bad field."""
    model = model or resolve_model(req.model)
    check_fixed_axes(model, req.tp)  # a tp no layout can use: say so now, not 0 plans later
    check_inverse(req)
    seq_length = INVERSE_SEQ_START if req.maximize == "seq_length" else None
    gpu_counts = req.num_gpus_options or ([req.num_gpus] if req.num_gpus is not None else [])
    if not gpu_counts:
        raise SpecError("num_gpus (or num_gpus_options) is required", field="num_gpus")
    batches = req.global_batch_size_options or (
        [req.global_batch_size] if req.global_batch_size is not None else []
    )
    if not batches and (req.maximize or req.minimize):  # one sequence per GPU at the most
        batches = [max(gpu_counts)]
    if not batches:
        raise SpecError(
            "global_batch_size (or global_batch_size_options) is required",
            field="global_batch_size",
        )
    clusters = [resolve_cluster(req, n) for n in sorted(set(gpu_counts))]
    jobs = [resolve_job(req, b, seq_length) for b in sorted(set(batches))]
    constraints = to_constraints(req)
    check_plan_versions(model, clusters[0], jobs[0], constraints)  # one stack for all scenarios
    return PreparedPlan(
        model=model,
        clusters=clusters,
        jobs=jobs,
        constraints=constraints,
        objective=to_objective(req),
        budget=SearchBudget(
            max_trials=EXHAUSTIVE_TRIALS if req.exhaustive else req.max_trials, seed=req.seed
        ),
        threshold=req.memory_threshold,
        top_k=req.top_k,
        pareto=req.pareto,
    )


def search(
    p: PreparedPlan,
    profile: PerformanceProfile,
    *,
    top_k: int | None = None,
    progress: Progress | None = None,
) -> PlanResult:
    """The planner's search of a prepared request (``top_k`` overrides the request's)."""
    return plan(
        p.model,
        p.clusters if len(p.clusters) > 1 else p.clusters[0],
        p.jobs if len(p.jobs) > 1 else p.jobs[0],
        constraints=p.constraints,
        objective=p.objective,
        profile=profile,
        budget=p.budget,
        threshold=p.threshold,
        top_k=p.top_k if top_k is None else top_k,
        pareto=p.pareto,
        progress=progress,
    )


def run_plan(
    req: PlanJobCreate,
    *,
    profile: PerformanceProfile | None = None,
    progress: Progress | None = None,
) -> PlanAnswer:
    """Search for the best layouts of ``req``: the typed result with each plan's launch flags."""
    p = to_plan(req)
    if req.maximize or req.minimize:
        from app.planning.memory_request import run_inverse

        return run_inverse(req, p, profile=profile, progress=progress)
    used = profile if profile is not None else load_profile(p.clusters[0].gpu)
    result = search(p, used, progress=progress)
    infeasible = None
    if not result.plans:  # infeasible is an answer: what would fit (planner.search.infeasible)
        infeasible = explain_infeasible(
            p.model, p.clusters[-1], p.jobs[0], rejections=result.rejections, profile=used,
            constraints=p.constraints, threshold=p.threshold,
        ).to_dict()  # fmt: skip
    return plan_report(
        result, model=p.model, cluster=p.clusters[0], profile=used, infeasible=infeasible
    )
