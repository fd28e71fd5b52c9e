"""The one conversion from a typed request (pydantic, at the edge) into the planner's domain types.

Every interface builds the same request type (``EvaluationRequest``, ``PlanJobCreate``): the API
from its JSON body, the CLI from its flags, ``planner evaluate --input`` from each JSON line,
``planner batch`` from each CSV row or YAML object, the web form from its fields. They differ
only in how they name a field back to the user (``label``): the JSON path, ``--num-gpus``, the
CSV column. Catalog names (model, GPU, cluster) resolve here, with aliases (``h100``) and "did
you mean" for the unknown ones. Bad input raises :class:`RequestError` (a ``SpecError``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

import models_db
from app.catalog.names import cluster_slug_for, gpu_slug_for
from app.catalog.network import BANDWIDTH_GROUP, check_network
from app.catalog.spec_numbers import read_spec_numbers
from app.core.messages import RequestError as RequestError  # its home: the catalog raises it
from app.core.messages import problem_fields
from app.core.units import GIB
from app.planning.schemas import MAX_GPUS, NETWORK_FIELDS, EvaluationRequest, PlanJobCreate
from app.planning.stack_fields import job_stack, layout_stack
from planner import ClusterSpec, GPUSpec, Layout, ModelSpec, SpecError, TrainingJob
from planner.space.version_check import check_settings

Request = TypeVar("Request", bound=BaseModel)
Label = Callable[[str], str]

# fields that take several values, and how the CLI, CSV rows and the web form write them
LIST_FIELDS = ("tp", "pp", "vpp", "cp", "ep", "etp", "micro_batch_size")
CHOICE_LIST_FIELDS = (
    "recompute",
    "optimizer_sharding",
    "recompute_modules",
    "grad_reduce_dtype",
    "optimizer_state_dtype",
    "optimizer_offload_fraction",
    "activation_offload_modules",
)
VERSIONED_LAYOUT_FIELDS = (
    "cp_comm_type", "cuda_graphs", "moe_dispatcher", "moe_a2a_overlap", "fp8_param_gather",
    "activation_offload_layers", "activation_offload_modules", "optimizer_offload_fraction",
    "optimizer_state_dtype", "recompute_modules", "pipeline_layout",
)  # fmt: skip
"""Request fields whose values need a Megatron-Core / TE release (stack_features.csv)."""
HF_KEYS = frozenset({"architectures", "model_type"})
"""Keys that make an inline model a Hugging Face config.json (models_db.resolve_model)."""
RANGE_FIELDS = {"num_gpus": "num_gpus_options", "global_batch_size": "global_batch_size_options"}
MAX_LIST_VALUES = 64


def error_text(exc: SpecError) -> str:
    """A job's error as its row (and the batch's job) shows it, local or on the service: the
    message, and the field where the message does not name it already."""
    if isinstance(exc, RequestError) or not exc.field or exc.field in exc.message:
        return exc.message
    return f"{exc.message} (field {exc.field})"


def parse_request(schema: type[Request], data: Any, *, label: Label | None = None) -> Request:
    """``data`` as the typed request ``schema``; RequestError naming each bad field."""
    if isinstance(data, schema):
        return data
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise RequestError(problem_fields(list(exc.errors()), label)) from None


# --- text forms of list fields (CLI flags, CSV cells, web form inputs) ------------------------
def int_list(value: Any, field: str, *, maximum: int = MAX_GPUS) -> list[int]:
    """Positive ints from a list, an int, or the text forms 'a,b,c' and 'lo-hi' (powers of two
    between lo and hi, and both ends)."""
    if isinstance(value, str):
        text = value.replace(" ", "")
        if "-" in text and "," not in text:
            lo, hi = (_int(part, field, maximum) for part in text.split("-", 1))
            if lo > hi:
                raise SpecError(f"{field}: range {value!r} is empty; write low-high", field=field)
            items, n = [], lo
            while n <= hi:
                items.append(n)
                n *= 2
            if items[-1] != hi:
                items.append(hi)
        else:
            items = [_int(x, field, maximum) for x in text.split(",") if x]
    elif isinstance(value, list | tuple):
        items = [_int(x, field, maximum) for x in value]
    else:
        items = [_int(value, field, maximum)]
    if not 1 <= len(items) <= MAX_LIST_VALUES:
        raise SpecError(f"{field} needs between 1 and {MAX_LIST_VALUES} values", field=field)
    return sorted(set(items))


def _int(value: Any, field: str, maximum: int) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()):  # not '²', '٣'
        raise SpecError(f"{field} must be a whole number, got {value!r}", field=field)
    number = int(text)
    if not 1 <= number <= maximum:
        raise SpecError(f"{field}={number} must be between 1 and {maximum}", field=field)
    return number


def expand_text_lists(data: Mapping[str, Any]) -> dict[str, Any]:
    """The request with text lists and ranges ('1,2,4', '64-1024', 'none,full') as lists.

    ``num_gpus`` / ``global_batch_size`` given as a list or range become their ``*_options``.
    """
    out = dict(data)
    for one, many in RANGE_FIELDS.items():
        value = out.get(one)
        if (isinstance(value, str) and not value.strip().isdigit()) or isinstance(value, list):
            out[many] = int_list(out.pop(one), one, maximum=1 << 24)
        elif isinstance(out.get(many), str):
            out[many] = int_list(out[many], many, maximum=1 << 24)
    for name in LIST_FIELDS:
        value = out.get(name)
        if isinstance(value, str):
            values = int_list(value, name, maximum=1 << 16)
            out[name] = values[0] if len(values) == 1 and "," not in value else values
    for name in CHOICE_LIST_FIELDS:
        value = out.get(name)
        if isinstance(value, str):
            out[name] = [x.strip() for x in value.split(",") if x.strip()]
    return out


def flag_label(field: str) -> str:
    """A request field as the CLI flag that sets it: num_gpus_options -> --num-gpus."""
    head, _, rest = field.partition(".")
    for one, many in RANGE_FIELDS.items():
        if head == many:
            head = one
    flag = "--" + head.replace("_", "-")
    if rest.isdigit():  # a list's item: --recompute none,bogus -> "value 2 of the list"
        return f"{flag} (value {int(rest) + 1} of the list)"
    return f"{flag} ({rest})" if rest else flag


def column_label(given: Mapping[str, Any]) -> Label:
    """A request field as the key or column the user wrote (num_gpus for a range they gave)."""

    def label(field: str) -> str:
        head, dot, rest = field.partition(".")
        for one, many in RANGE_FIELDS.items():
            if head == many and many not in given and one in given:
                return one + dot + rest
        return field

    return label


# --- catalog names (aliases and did-you-mean: app.catalog.names) ----------------------------
def resolve_model(ref: Any) -> ModelSpec:
    if isinstance(ref, ModelSpec):
        return ref
    if isinstance(ref, dict) and not HF_KEYS & set(ref):  # ModelSpec fields: the API's numbers
        ref = read_spec_numbers(ModelSpec, ref, "model")
    try:
        if isinstance(ref, str):  # a slug only: a service never opens files named in a request
            return models_db.load_model(ref)
        return models_db.resolve_model(ref)
    except SpecError as exc:
        field = "model" if exc.field in (None, "model", "slug") else f"model.{exc.field}"
        raise SpecError(exc.message, field=field) from exc


# --- clusters: the one path from a cluster's name to the numbers the planner gets ------------
def cluster_network(preset: Mapping[str, Any], req: Mapping[str, Any]) -> list[str]:
    """The network fields of a cluster a request takes: none of the bandwidth group when the
    request describes the network itself, and no NIC count for another node size (the per-GPU
    bandwidth stays the cluster's)."""
    names = [n for n in NETWORK_FIELDS if preset.get(n) is not None]
    if any(req.get(n) is not None for n in BANDWIDTH_GROUP):
        return [n for n in names if n not in BANDWIDTH_GROUP]
    if req["gpus_per_node"] != preset.get("gpus_per_node"):
        return [n for n in names if n not in BANDWIDTH_GROUP[1:]]
    return names


def inline_cluster(req: Mapping[str, Any], preset: Mapping[str, Any]) -> dict[str, Any]:
    """The request with a cluster's numbers in place of its name: the cluster's GPU and GPUs per
    node unless the request sets them, and its network by :func:`cluster_network`'s rules.

    The one place a cluster reference resolves: the service calls it with a user's cluster or a
    preset from its catalog, :func:`resolve_cluster` with a built-in preset (no database)."""
    out = {k: v for k, v in req.items() if k != "cluster" and v is not None}
    out.setdefault("gpu", preset["gpu"])
    out.setdefault("gpus_per_node", preset["gpus_per_node"])
    for name in cluster_network(preset, out):
        out.setdefault(name, preset[name])
    return out


def builtin_cluster(name: str) -> dict[str, Any]:
    """A built-in preset (by slug or alias, "did you mean" when unknown) as the catalog stores
    it."""
    from app.catalog.service import cluster_preset_dict

    return cluster_preset_dict(models_db.load_cluster_preset(cluster_slug_for(name)))


def _inlined(req: EvaluationRequest | PlanJobCreate) -> EvaluationRequest | PlanJobCreate:
    """``req`` with its cluster (a built-in preset here) resolved by :func:`inline_cluster`."""
    if req.cluster is None:
        return req
    data = inline_cluster(
        req.model_dump(mode="json", exclude_none=True), builtin_cluster(req.cluster)
    )
    return type(req).model_validate(data)


def resolve_gpu(req: EvaluationRequest | PlanJobCreate) -> GPUSpec:
    """The request's GPU: a slug or alias, an inline GPUSpec object, or its cluster's."""
    req = _inlined(req)
    ref = req.gpu
    if ref is None:
        raise SpecError(f"gpu is required; one of: {', '.join(models_db.list_gpus())}", field="gpu")
    if isinstance(ref, dict):
        ref = read_spec_numbers(GPUSpec, ref, "gpu")  # "80e9" as a number; true refused
        try:
            gpu = GPUSpec.from_dict(ref)
        except SpecError as exc:
            raise SpecError(exc.message, field=f"gpu.{exc.field}" if exc.field else "gpu") from exc
        except (TypeError, ValueError) as exc:
            raise SpecError(f"gpu: {exc}", field="gpu") from exc
    else:
        gpu = models_db.load_gpu(gpu_slug_for(ref))
    if req.gpu_memory_gib is not None:
        gpu = dataclasses.replace(gpu, hbm_bytes=int(req.gpu_memory_gib * GIB))
    return gpu


def resolve_cluster(req: EvaluationRequest | PlanJobCreate, num_gpus: int) -> ClusterSpec:
    """``num_gpus`` GPUs on the GPU's DGX-style preset with the request's (or its cluster's)
    node size and network."""
    req = _inlined(req)
    gpu = resolve_gpu(req)
    # a user GPU takes the H100 preset's network
    preset = gpu.name if gpu.name in models_db.list_gpus() else "h100-sxm-80gb"
    try:
        cluster = models_db.cluster_spec(preset, num_gpus, req.gpus_per_node)
    except SpecError as exc:
        raise SpecError(exc.message, field=exc.field or "num_gpus") from exc
    network = {n: getattr(req, n) for n in NETWORK_FIELDS if getattr(req, n) is not None}
    per_gpu = check_network(
        nics_per_node=req.nics_per_node,
        nic_bandwidth_bytes_per_s=req.nic_bandwidth_bytes_per_s,
        inter_node_bandwidth_bytes_per_s=req.inter_node_bandwidth_bytes_per_s,
        gpus_per_node=cluster.gpus_per_node,
    )
    if per_gpu is None and req.inter_node_bandwidth_bytes_per_s is not None:
        network |= {"nics_per_node": None, "nic_bandwidth_bytes_per_s": None}  # the given rate wins
    try:
        return dataclasses.replace(cluster, gpu=gpu, **network)
    except SpecError as exc:
        raise SpecError(exc.message, field=exc.field) from exc


def resolve_job(
    req: EvaluationRequest | PlanJobCreate, global_batch_size: int, seq_length: int | None = None
) -> TrainingJob:
    length = seq_length or req.seq_length
    if length is None:
        raise SpecError("seq_length is required (tokens per sequence)", field="seq_length")
    return TrainingJob(
        seq_length=length,
        global_batch_size=global_batch_size,
        precision=req.precision,
        **job_stack(req),
    )


# --- evaluations ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationInputs:
    """What one evaluation request resolves to."""

    model: ModelSpec
    cluster: ClusterSpec
    job: TrainingJob
    layout: Layout
    threshold: float
    """Feasibility threshold: the share of HBM a layout may use."""


def to_layout(req: EvaluationRequest) -> Layout:
    dp = max(1, req.num_gpus // (req.tp * req.pp * req.cp))
    return Layout(
        tp=req.tp,
        pp=req.pp,
        vpp=req.vpp,
        cp=req.cp,
        ep=req.ep,
        etp=req.etp,
        dp=dp,
        micro_batch_size=req.micro_batch_size,
        recompute=req.recompute,
        sequence_parallel=req.sequence_parallel,
        optimizer_sharding=req.optimizer_sharding,
        moe_a2a_overlap=req.moe_a2a_overlap,
        moe_dispatcher=req.moe_dispatcher,
        grad_reduce_dtype=req.grad_reduce_dtype,
        optimizer_state_dtype=req.optimizer_state_dtype,
        fp8_param_gather=req.fp8_param_gather,
        recompute_modules=tuple(req.recompute_modules) if req.recompute_modules else None,
        recompute_num_layers=req.recompute_num_layers,
        cuda_graphs=req.cuda_graphs,
        activation_offload_layers=req.activation_offload_layers,
        optimizer_offload_fraction=req.optimizer_offload_fraction,
        pipeline_layout=req.pipeline_layout,
        activation_offload_modules=tuple(req.activation_offload_modules)
        if req.activation_offload_modules
        else None,
        **layout_stack(req),
    )


def to_evaluation(req: EvaluationRequest, model: ModelSpec | None = None) -> EvaluationInputs:
    """The domain inputs of one evaluation (``model`` when the caller has resolved it)."""
    inputs = EvaluationInputs(
        model=model or resolve_model(req.model),
        cluster=resolve_cluster(req, req.num_gpus),
        job=resolve_job(req, req.global_batch_size),
        layout=to_layout(req),
        threshold=req.memory_threshold,
    )
    # a setting the job's Megatron-Core / TE lacks is a 422 on its field, not a broken rule
    settings = {name: getattr(inputs.layout, name) for name in VERSIONED_LAYOUT_FIELDS}
    check_settings(inputs.model, inputs.cluster, inputs.job, settings)
    return inputs
