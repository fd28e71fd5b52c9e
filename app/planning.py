"""The planning service layer shared by the CLI, the API and the web UI.

Turns request dicts (the same field names everywhere: underscores in JSON, dashes on the command
line) into planner domain objects, runs the planner, and returns JSON-ready dicts. Bad input
raises :class:`planner.specs.SpecError` whose ``field`` names the request field to fix.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import Any

import models_db
from models_db.profiles import load_profile
from planner.calibration.measurements import gpu_slug
from planner.performance.step_time import PerformanceProfile
from planner.search.evaluate import evaluate_layouts
from planner.specs import (
    MOE_DISPATCHER_CHOICES,
    OPTIMIZER_SHARDING_CHOICES,
    PRECISION_CHOICES,
    RECOMPUTE_CHOICES,
    ClusterSpec,
    GPUSpec,
    Layout,
    ModelSpec,
    SpecError,
    TrainingJob,
)

GIB = 2**30

NETWORK_FIELDS = (
    "inter_node_bandwidth_bytes_per_s",
    "inter_node_latency_s",
    "intra_node_latency_s",
)
COMMON_FIELDS = {
    "model",
    "gpu",
    "cluster",
    "gpu_memory_gib",
    "num_gpus",
    "gpus_per_node",
    "seq_length",
    "global_batch_size",
    "precision",
    "memory_threshold",
    *NETWORK_FIELDS,
}
LAYOUT_FIELDS = {
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "micro_batch_size",
    "recompute",
    "sequence_parallel",
    "optimizer_sharding",
    "moe_a2a_overlap",
    "moe_dispatcher",
}
PLAN_FIELDS = {
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "micro_batch_size",
    "max_tp",
    "max_pp",
    "max_vpp",
    "max_cp",
    "max_ep",
    "max_micro_batch_size",
    "recompute",
    "sequence_parallel",
    "optimizer_sharding",
    "moe_a2a_overlap",
    "moe_dispatcher",
    "num_gpus_options",
    "global_batch_size_options",
    "objective",
    "token_budget",
    "usd_per_gpu_hour",
    "top_k",
    "seed",
    "max_trials",
    "exhaustive",
    "pareto",
}

Progress = Callable[[int, int], None]


# --- field coercion with messages a person can act on --------------------------------------
def int_field(
    req: dict[str, Any],
    name: str,
    default: int | None = None,
    *,
    minimum: int = 1,
    maximum: int | None = None,
) -> int | None:
    value = req.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str | float):
        raise SpecError(f"{name} must be an integer, got {value!r}", field=name)
    try:
        number = int(value)
        if isinstance(value, float) and number != value:
            raise ValueError
    except ValueError:
        raise SpecError(f"{name} must be an integer, got {value!r}", field=name) from None
    if number < minimum:
        raise SpecError(f"{name}={number} must be at least {minimum}", field=name)
    if maximum is not None and number > maximum:
        raise SpecError(f"{name}={number} must be at most {maximum}", field=name)
    return number


def required_int_field(req: dict[str, Any], name: str, **kw: Any) -> int:
    value = int_field(req, name, **kw)
    if value is None:
        raise SpecError(f"{name} is required", field=name)
    return value


def float_field(
    req: dict[str, Any], name: str, default: float | None, *, low: float, high: float
) -> float | None:
    value = req.get(name, default)
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{name} must be a number, got {value!r}", field=name) from None
    if not low <= number <= high:
        raise SpecError(f"{name}={number} must be between {low} and {high}", field=name)
    return number


def bool_field(req: dict[str, Any], name: str, default: bool | None) -> bool | None:
    value = req.get(name, default)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    raise SpecError(f"{name} must be true or false, got {value!r}", field=name)


def choice_field(req: dict[str, Any], name: str, default: str, choices: Iterable[str]) -> str:
    value = req.get(name, default)
    options = tuple(choices)
    if value not in options:
        raise SpecError(f"{name}={value!r} is not one of {', '.join(options)}", field=name)
    return str(value)


def dispatcher_field(req: dict[str, Any]) -> str | None:
    """``moe_dispatcher``: alltoall, flex, or absent/null for the planner's choice."""
    if req.get("moe_dispatcher") is None:
        return None
    return choice_field(req, "moe_dispatcher", "alltoall", MOE_DISPATCHER_CHOICES)


def _check_fields(req: dict[str, Any], allowed: set[str]) -> None:
    if not isinstance(req, dict):
        raise SpecError("the request must be a JSON object")
    unknown = sorted(set(req) - allowed)
    if unknown:
        raise SpecError(
            f"unknown field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}",
            field=unknown[0],
        )


# --- resolution ------------------------------------------------------------------------------
def resolve_model(ref: Any) -> ModelSpec:
    if ref is None or ref == "":
        raise SpecError(
            "model is required: a catalog slug (see `planner catalog list`) or an inline "
            "object (ModelSpec fields or a Hugging Face config.json)",
            field="model",
        )
    if isinstance(ref, ModelSpec):
        return ref
    if not isinstance(ref, str | dict):
        raise SpecError("model must be a catalog slug or an object", field="model")
    try:
        if isinstance(ref, str):  # a slug only: a service never opens files named in a request
            return models_db.load_model(ref)
        return models_db.resolve_model(ref)
    except SpecError as exc:
        raise SpecError(
            exc.message,
            field="model" if exc.field in (None, "model", "slug") else f"model.{exc.field}",
        ) from exc


def resolve_gpu(req: dict[str, Any]) -> GPUSpec:
    """A catalog slug, or an inline object of GPUSpec fields (a user-defined GPU)."""
    slug = req.get("gpu")
    if isinstance(slug, dict):
        try:
            gpu = GPUSpec.from_dict(slug)
        except SpecError as exc:
            raise SpecError(exc.message, field=f"gpu.{exc.field}" if exc.field else "gpu") from exc
        except (TypeError, ValueError) as exc:
            raise SpecError(f"gpu: {exc}", field="gpu") from exc
        return _memory_override(req, gpu)
    if not slug or not isinstance(slug, str):
        raise SpecError(f"gpu is required; one of: {', '.join(models_db.list_gpus())}", field="gpu")
    try:
        gpu = models_db.load_gpu(slug)
    except SpecError as exc:
        raise SpecError(exc.message, field="gpu") from exc
    return _memory_override(req, gpu)


def _memory_override(req: dict[str, Any], gpu: GPUSpec) -> GPUSpec:
    override = float_field(req, "gpu_memory_gib", None, low=1.0, high=4096.0)
    if override is not None:
        gpu = dataclasses.replace(gpu, hbm_bytes=int(override * GIB))
    return gpu


def resolve_cluster(req: dict[str, Any], num_gpus: int) -> ClusterSpec:
    gpu = resolve_gpu(req)
    gpus_per_node = int_field(req, "gpus_per_node", None, maximum=576)
    preset_gpu = gpu.name if gpu.name in models_db.list_gpus() else "h100-sxm-80gb"
    try:  # network defaults of the GPU's DGX-style preset (a user GPU: the H100 preset's)
        cluster = models_db.cluster_spec(preset_gpu, num_gpus, gpus_per_node)
    except SpecError as exc:
        raise SpecError(exc.message, field=exc.field or "num_gpus") from exc
    network = {}
    for name in NETWORK_FIELDS:  # a user cluster's own network numbers
        value = float_field(req, name, None, low=1e-9, high=1e15)
        if value is not None:
            network[name] = value
    try:
        return dataclasses.replace(cluster, gpu=gpu, **network)
    except SpecError as exc:
        raise SpecError(exc.message, field=exc.field) from exc


def resolve_job(req: dict[str, Any], global_batch_size: int | None = None) -> TrainingJob:
    return TrainingJob(
        seq_length=required_int_field(req, "seq_length", maximum=1 << 22),
        global_batch_size=global_batch_size
        or required_int_field(req, "global_batch_size", maximum=1 << 24),
        precision=choice_field(req, "precision", "bf16", PRECISION_CHOICES),  # type: ignore[arg-type]
    )


def resolve_layout(req: dict[str, Any], num_gpus: int) -> Layout:
    tp = required_int_field(req, "tp", default=1, maximum=1024)
    pp = required_int_field(req, "pp", default=1, maximum=1024)
    cp = required_int_field(req, "cp", default=1, maximum=1024)
    dp = max(1, num_gpus // (tp * pp * cp))
    return Layout(
        tp=tp,
        pp=pp,
        vpp=required_int_field(req, "vpp", default=1, maximum=1024),
        cp=cp,
        ep=required_int_field(req, "ep", default=1, maximum=4096),
        etp=int_field(req, "etp", None, maximum=1024),
        dp=dp,
        micro_batch_size=required_int_field(req, "micro_batch_size", default=1, maximum=1 << 16),
        recompute=choice_field(req, "recompute", "none", RECOMPUTE_CHOICES),  # type: ignore[arg-type]
        sequence_parallel=bool_field(req, "sequence_parallel", None),
        optimizer_sharding=choice_field(  # type: ignore[arg-type]
            req, "optimizer_sharding", "optimizer", OPTIMIZER_SHARDING_CHOICES
        ),
        moe_a2a_overlap=bool_field(req, "moe_a2a_overlap", None),
        moe_dispatcher=dispatcher_field(req),  # type: ignore[arg-type]
    )


def memory_threshold(req: dict[str, Any]) -> float:
    value = float_field(req, "memory_threshold", 0.8, low=0.05, high=1.0)
    assert value is not None
    return value


def profile_for(gpu: GPUSpec, profile: PerformanceProfile | None) -> PerformanceProfile:
    return profile if profile is not None else _shipped_profile(gpu)


@functools.lru_cache(maxsize=64)
def _shipped_profile(gpu: GPUSpec) -> PerformanceProfile:
    """models_db's profile of a GPU, parsed once (a file read and parse per request before)."""
    return load_profile(gpu)


# --- entry points ----------------------------------------------------------------------------
def evaluate_request(
    request: dict[str, Any], *, profile: PerformanceProfile | None = None
) -> dict[str, Any]:
    """Evaluate one layout request (the JSON of ``planner evaluate --json``)."""
    return evaluate_requests([request], profile=profile)[0]


def evaluate_requests(
    requests: list[dict[str, Any]],
    *,
    profile: PerformanceProfile | None = None,
    errors_inline: bool = False,
) -> list[dict[str, Any]]:
    """Evaluate many layout requests; those sharing model, cluster and job run as one batch.

    With ``errors_inline`` a bad request yields ``{"error": {...}}`` in its place instead of
    raising, so one bad line never sinks the others.
    """
    groups: dict[tuple[Any, ...], list[int]] = {}
    resolved: dict[tuple[Any, ...], tuple[ModelSpec, ClusterSpec, TrainingJob, float]] = {}
    layouts: list[Layout | None] = [None] * len(requests)
    out: list[dict[str, Any] | None] = [None] * len(requests)
    model_cache: dict[str, ModelSpec] = {}
    for i, req in enumerate(requests):
        try:
            _check_fields(req, COMMON_FIELDS | LAYOUT_FIELDS)
            ref = req.get("model")
            key_model = ref if isinstance(ref, str) else repr(ref)
            if key_model not in model_cache:
                model_cache[key_model] = resolve_model(ref)
            model = model_cache[key_model]
            num_gpus = required_int_field(req, "num_gpus", maximum=1 << 17)
            cluster = resolve_cluster(req, num_gpus)
            job = resolve_job(req)
            threshold = memory_threshold(req)
            layouts[i] = resolve_layout(req, num_gpus)
        except SpecError as exc:
            if not errors_inline:
                raise
            out[i] = {"error": {"message": exc.message, "field": exc.field}}
            continue
        key = (key_model, cluster, job, threshold)
        groups.setdefault(key, []).append(i)
        resolved[key] = (model, cluster, job, threshold)
    for key, indexes in groups.items():
        model, cluster, job, threshold = resolved[key]
        batch_layouts = [layouts[i] for i in indexes]
        results = evaluate_layouts(
            model,
            cluster,
            job,
            [lay for lay in batch_layouts if lay is not None],
            profile_for(cluster.gpu, profile),
            threshold=threshold,
        )
        for i, result in zip(indexes, results, strict=True):
            result["model"] = model.name
            result["gpu"] = cluster.gpu.name
            result["num_gpus"] = cluster.num_gpus
            out[i] = result
    return [r if r is not None else {"error": {"message": "not evaluated"}} for r in out]


def plan_request(
    request: dict[str, Any],
    *,
    profile: PerformanceProfile | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Search for the best layouts (the JSON of ``planner plan --json``)."""
    from app.plan_request import run_plan  # the search stack loads optuna: import it lazily

    _check_fields(request, COMMON_FIELDS | PLAN_FIELDS)
    return run_plan(request, profile=profile, progress=progress)


def validate_plan_request(request: dict[str, Any]) -> tuple[ModelSpec, GPUSpec]:
    """Everything ``plan_request`` would reject, checked without searching."""
    from app.plan_request import prepare_plan

    _check_fields(request, COMMON_FIELDS | PLAN_FIELDS)
    prepared = prepare_plan(request)
    return prepared.model, prepared.clusters[0].gpu


def gpu_from_type_string(text: str) -> GPUSpec:
    """The catalog GPU for a free-text GPU type as measurement files and logs write it.

    Accepts catalog slugs and names such as 'A100-SXM4-80GB', 'H100 (DGX-H100)' or 'H200'.
    """
    slugs = models_db.list_gpus()
    key = text.strip().lower()
    slug = key if key in slugs else gpu_slug(key)  # the measurement loader's own mapping
    if slug is not None:
        return models_db.load_gpu(slug)
    raise SpecError(
        f"unknown GPU type {text!r}; use a catalog slug: {', '.join(slugs)}", field="gpu_type"
    )
