"""Plan requests: turn a request dict into a search, and its result into JSON with launch flags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.planning.compute import (
    OPTIMIZER_SHARDING_CHOICES,
    RECOMPUTE_CHOICES,
    Progress,
    bool_field,
    dispatcher_field,
    float_field,
    int_field,
    memory_threshold,
    profile_for,
    resolve_cluster,
    resolve_job,
    resolve_model,
)
from planner.megatron import launch_spec
from planner.performance import PerformanceProfile
from planner.search import Objective, SearchBudget, plan
from planner.space import SearchConstraints
from planner.specs import ClusterSpec, ModelSpec, SpecError, TrainingJob

AXES = ("tp", "pp", "vpp", "cp", "ep", "etp", "micro_batch_size")
MAX_AXES = ("max_tp", "max_pp", "max_vpp", "max_cp", "max_ep", "max_micro_batch_size")


def _int_list(req: dict[str, Any], name: str, *, maximum: int) -> list[int] | None:
    """A list of positive ints from a list, a single int, or 'a,b,c' / 'lo-hi' strings."""
    value = req.get(name)
    if value is None:
        return None
    items: list[Any]
    if isinstance(value, str):
        text = value.replace(" ", "")
        if "-" in text and "," not in text:
            lo_text, hi_text = text.split("-", 1)
            lo = int_field({name: lo_text}, name, maximum=maximum)
            hi = int_field({name: hi_text}, name, maximum=maximum)
            assert lo is not None and hi is not None
            if lo > hi:
                raise SpecError(f"{name}: range {value!r} is empty; write low-high", field=name)
            items, n = [], lo  # powers of two between lo and hi, and both ends
            while n <= hi:
                items.append(n)
                n *= 2
            if items[-1] != hi:
                items.append(hi)
        else:
            items = [x for x in text.split(",") if x]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        items = [value]
    if not items or len(items) > 64:
        raise SpecError(f"{name} needs between 1 and 64 values", field=name)
    out = []
    for item in items:
        number = int_field({name: item}, name, maximum=maximum)
        assert number is not None
        out.append(number)
    return sorted(set(out))


def _str_list(req: dict[str, Any], name: str, choices: tuple[str, ...]) -> tuple[str, ...] | None:
    value = req.get(name)
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        raise SpecError(f"{name} must be a list of {', '.join(choices)}", field=name)
    for item in items:
        if item not in choices:
            raise SpecError(f"{name}: {item!r} is not one of {', '.join(choices)}", field=name)
    return tuple(dict.fromkeys(items))


def constraints_from_request(req: dict[str, Any]) -> SearchConstraints:
    kwargs: dict[str, Any] = {}
    for axis in AXES:
        values = _int_list(req, axis, maximum=1 << 16)
        if values is not None:
            kwargs[axis] = tuple(values)
    for name in MAX_AXES:
        value = int_field(req, name, None, maximum=1 << 16)
        if value is not None:
            kwargs[name] = value
    recompute = _str_list(req, "recompute", RECOMPUTE_CHOICES)
    if recompute is not None:
        kwargs["recompute"] = recompute
    sharding = _str_list(req, "optimizer_sharding", OPTIMIZER_SHARDING_CHOICES)
    if sharding is not None:
        kwargs["optimizer_sharding"] = sharding
    sp = req.get("sequence_parallel")
    if sp is not None:
        kwargs["sequence_parallel"] = (bool(bool_field(req, "sequence_parallel", None)),)
    kwargs["moe_a2a_overlap"] = bool_field(req, "moe_a2a_overlap", None)
    kwargs["moe_dispatcher"] = dispatcher_field(req)
    return SearchConstraints(**kwargs)


def objective_from_request(req: dict[str, Any]) -> Objective:
    kind = req.get("objective", "throughput")
    token_budget = float_field(req, "token_budget", None, low=1.0, high=1e16)
    price = float_field(req, "usd_per_gpu_hour", None, low=0.0, high=1e4)
    kwargs: dict[str, Any] = {"kind": kind}
    if token_budget is not None:
        kwargs["token_budget"] = token_budget
    if price is not None:
        kwargs["usd_per_gpu_hour"] = price
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


def prepare_plan(req: dict[str, Any]) -> PreparedPlan:
    """Resolve and validate a plan request without searching; SpecError names the bad field."""
    model = resolve_model(req.get("model"))
    num_gpus_options = _int_list(req, "num_gpus_options", maximum=1 << 17)
    batch_options = _int_list(req, "global_batch_size_options", maximum=1 << 24)
    num_gpus = int_field(req, "num_gpus", None, maximum=1 << 17)
    if num_gpus_options is None:
        if num_gpus is None:
            raise SpecError("num_gpus (or num_gpus_options) is required", field="num_gpus")
        num_gpus_options = [num_gpus]
    if batch_options is None:
        gbs = int_field(req, "global_batch_size", None, maximum=1 << 24)
        if gbs is None:
            raise SpecError(
                "global_batch_size (or global_batch_size_options) is required",
                field="global_batch_size",
            )
        batch_options = [gbs]
    clusters = [resolve_cluster(req, n) for n in num_gpus_options]
    jobs = [resolve_job(req, global_batch_size=b) for b in batch_options]
    seed = int_field(req, "seed", 0, minimum=0, maximum=2**31 - 1)
    max_trials = int_field(req, "max_trials", 500, maximum=1_000_000)
    top_k = int_field(req, "top_k", 10, maximum=1000)
    exhaustive = bool(bool_field(req, "exhaustive", False))
    return PreparedPlan(
        model=model,
        clusters=clusters,
        jobs=jobs,
        constraints=constraints_from_request(req),
        objective=objective_from_request(req),
        budget=SearchBudget(
            max_trials=1_000_000_000 if exhaustive else int(max_trials or 500),
            seed=int(seed or 0),
        ),
        threshold=memory_threshold(req),
        top_k=int(top_k or 10),
        pareto=bool(bool_field(req, "pareto", False)),
    )


def run_plan(
    req: dict[str, Any],
    *,
    profile: PerformanceProfile | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    p = prepare_plan(req)
    result = plan(
        p.model,
        p.clusters if len(p.clusters) > 1 else p.clusters[0],
        p.jobs if len(p.jobs) > 1 else p.jobs[0],
        constraints=p.constraints,
        objective=p.objective,
        profile=profile_for(p.clusters[0].gpu, profile),
        budget=p.budget,
        threshold=p.threshold,
        top_k=p.top_k,
        pareto=p.pareto,
        progress=progress,
    )
    out = result.to_dict()
    for plan_json, found in zip(out["plans"], result.plans, strict=True):
        launch = launch_spec(found.model, found.cluster, found.job, found.layout)
        plan_json["megatron"] = {
            "args": launch.args,
            "command": launch.command,
            "env": launch.env,
            "notes": list(launch.notes),
        }
    out["model"] = p.model.name
    out["gpu"] = p.clusters[0].gpu.name
    return out
