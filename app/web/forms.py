"""The plan form: its fields, their defaults, and the conversion of posted values into a request.

The request uses the same field names as the JSON API and the CLI (see ``app.planning``), so a
plan made in the browser can be replayed with ``planner plan`` or ``POST /v1/plans``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.input_policy import load_json_text
from app.web import memory_form, numbers, stack_form
from planner.specs import SpecError

RECOMPUTE_OPTIONS = ("none", "selective", "full")
SHARDING_OPTIONS = ("none", "optimizer", "full")
OBJECTIVES = (
    ("throughput", "Highest throughput (tokens/s per GPU)"),
    ("time_to_train", "Shortest time to train a token budget"),
    ("cost", "Lowest cost for a token budget"),
)
PRECISIONS = ("bf16", "fp8", "fp16")

# Axes that may be fixed to one value or given as a list ("1,2,4") or range ("1-8").
AXIS_FIELDS = (
    ("tp", "Tensor parallel (TP)"),
    ("pp", "Pipeline parallel (PP)"),
    ("vpp", "Virtual pipeline stages (VPP)"),
    ("cp", "Context parallel (CP)"),
    ("ep", "Expert parallel (EP)"),
    ("etp", "Expert tensor parallel (ETP)"),
    ("micro_batch_size", "Micro-batch size"),
)
MAX_FIELDS = (
    ("max_tp", "Max TP"),
    ("max_pp", "Max PP"),
    ("max_vpp", "Max VPP"),
    ("max_cp", "Max CP"),
    ("max_ep", "Max EP"),
    ("max_micro_batch_size", "Max micro-batch"),
)
ADVANCED_GROUPS = ("_stack_fields.html",)
"""Templates of further Advanced groups, each a ``<fieldset class="form-group">`` (a missing
one is skipped: the software stack and the cluster description come from their own issues)."""
RANGE_INPUTS = ("num_gpus", "global_batch_size")
"""Inputs that take a list or a range ("64-512") as well as one value."""
INT_FIELDS = ("num_gpus", "gpus_per_node", "seq_length", "global_batch_size", "top_k")
DEFAULT_GPUS_PER_NODE = 8
FLOAT_FIELDS = ("token_budget", "usd_per_gpu_hour")

DEFAULTS: dict[str, Any] = {
    "model_source": "catalog",
    "model": "",
    "hf_config": "",
    "gpu": "",
    "num_gpus": "64",
    "gpus_per_node": "8",
    "seq_length": "4096",
    "global_batch_size": "1024",
    "precision": "bf16",
    "objective": "throughput",
    "recompute": list(RECOMPUTE_OPTIONS),
    "optimizer_sharding": ["optimizer"],
    "moe_a2a_overlap": "auto",
    "moe_dispatcher": "auto",
    "top_k": "10",
    **memory_form.DEFAULTS,
    **stack_form.DEFAULTS,
}
A2A_OVERLAP_OPTIONS = {"auto": None, "on": True, "off": False}
"""The MoE all-to-all overlap select: auto = on wherever Megatron allows it."""
DISPATCHER_OPTIONS = ("auto", "alltoall", "flex")
MOE_SWITCHES = ("moe_a2a_overlap", "moe_dispatcher")


@dataclass(frozen=True, kw_only=True, slots=True)
class FormState:
    """What the form shows: the values as typed, and an error message per field name."""

    values: dict[str, Any]
    errors: dict[str, str] = field(default_factory=dict)
    message: str | None = None
    """An error that names no field (shown above the form)."""

    def value(self, name: str) -> Any:
        return self.values.get(name, "")

    def checked(self, name: str, option: str) -> bool:
        chosen = self.values.get(name) or []
        return option in chosen

    def open_advanced(self) -> bool:
        """Open the Advanced section when it holds a value or an error."""
        advanced = {name for name, _ in AXIS_FIELDS} | {name for name, _ in MAX_FIELDS}
        advanced |= {
            "token_budget",
            "usd_per_gpu_hour",
            "objective",
            "recompute",
            "optimizer_sharding",
            "moe_a2a_overlap",
            "moe_dispatcher",
            "top_k",
            "exhaustive",
        }
        if any(name in advanced or memory_form.is_memory_error(name) for name in self.errors):
            return True
        if any(self.values.get(name) not in (None, "", "auto") for name in MOE_SWITCHES):
            return True
        if stack_form.has_values(self.values) or any(map(stack_form.is_stack_input, self.errors)):
            return True
        return any(self.values.get(name) for name, _ in AXIS_FIELDS + MAX_FIELDS)


def default_state(models: list[str], gpus: list[str]) -> FormState:
    values = dict(DEFAULTS)
    values["model"] = _prefer(models, ("llama3.1-8b", "llama-3-8b"))
    values["gpu"] = _prefer(gpus, ("h100-sxm-80gb", "h100"))
    return FormState(values=values)


def _prefer(options: list[str], wanted: tuple[str, ...]) -> str:
    for slug in wanted:
        if slug in options:
            return slug
    return options[0] if options else ""


def form_values(form: Mapping[str, Any], multi: Mapping[str, list[str]]) -> dict[str, Any]:
    """The posted values as the form shows them again (strings; lists for checkbox groups)."""
    values: dict[str, Any] = {k: str(v).strip() for k, v in form.items() if isinstance(v, str)}
    for name in ("recompute", "optimizer_sharding"):
        values[name] = list(multi.get(name, []))
    values["exhaustive"] = "exhaustive" in form
    values.update(memory_form.memory_values(form, multi))
    values.setdefault("model_source", "catalog")
    return values


def to_request(values: Mapping[str, Any]) -> dict[str, Any]:
    """A plan request (``app.planning.plan_request``'s fields) from the form's values.

    Only syntax is checked here (numbers that are not numbers, JSON that is not JSON); the
    planning layer checks meaning, and both report through ``SpecError.field``.
    """
    req: dict[str, Any] = {}
    if values.get("model_source") == "hf_config":
        req["model"] = {"hf_config": _parse_config(str(values.get("hf_config", "")))}
    else:
        req["model"] = values.get("model") or None
    if values.get("cluster"):  # the cluster sets the GPU type and GPUs per node (and profile)
        req["cluster"] = values["cluster"]
    else:
        req["gpu"] = values.get("gpu") or None
    req["precision"] = values.get("precision") or "bf16"
    for name in INT_FIELDS:
        text = str(values.get(name, "")).strip()
        if name == "gpus_per_node" and values.get("cluster"):
            continue
        if text:
            req[name] = _number(name, text, int)
    nodes = str(values.get("num_nodes", "")).strip()
    if nodes and "num_gpus" not in req:  # GPUs given as a node count
        count = _number("num_nodes", nodes, int)
        per_node = str(values.get("gpus_per_node") or DEFAULT_GPUS_PER_NODE)  # a cluster's too
        req["num_gpus"] = int(count) * int(_number("gpus_per_node", per_node, int))
    for name in FLOAT_FIELDS:
        text = str(values.get(name, "")).strip()
        if text:
            req[name] = _number(name, text, float)
    for name, _ in AXIS_FIELDS:
        text = str(values.get(name, "")).replace(" ", "")
        if text:
            whole = numbers.read_whole(text) is not None  # not "²", which isdigit() takes
            req[name] = _number(name, text, int) if whole else text
    for name, _ in MAX_FIELDS:
        text = str(values.get(name, "")).strip()
        if text:
            req[name] = _number(name, text, int)
    for name, options in (
        ("recompute", RECOMPUTE_OPTIONS),
        ("optimizer_sharding", SHARDING_OPTIONS),
    ):
        chosen = [x for x in values.get(name) or [] if x in options]
        if not chosen:
            raise SpecError(f"tick at least one {name.replace('_', ' ')} option", field=name)
        req[name] = chosen
    overlap_choice = str(values.get("moe_a2a_overlap") or "auto")
    if overlap_choice not in A2A_OVERLAP_OPTIONS:
        raise SpecError("choose auto, on or off", field="moe_a2a_overlap")
    if A2A_OVERLAP_OPTIONS[overlap_choice] is not None:
        req["moe_a2a_overlap"] = A2A_OVERLAP_OPTIONS[overlap_choice]
    dispatcher = str(values.get("moe_dispatcher") or "auto")
    if dispatcher not in DISPATCHER_OPTIONS:
        raise SpecError("choose auto, alltoall or flex", field="moe_dispatcher")
    if dispatcher != "auto":
        req["moe_dispatcher"] = dispatcher
    req.update(memory_form.memory_request(values))
    req.update(stack_form.stack_request(values))
    req["objective"] = values.get("objective") or "throughput"
    if values.get("exhaustive"):
        req["exhaustive"] = True
    req["pareto"] = True
    return req


def _number(name: str, text: str, kind: type[int] | type[float]) -> int | float:
    value = numbers.read_whole(text) if kind is int else numbers.read_decimal(text)
    if value is None:  # ASCII decimal only (app/web/numbers.py): not '٣' or '1_000'
        raise SpecError(numbers.refusal(name, text, whole=kind is int), field=name)
    return value


def _parse_config(text: str) -> dict[str, Any]:
    if not text.strip():
        raise SpecError("paste the model's config.json here", field="hf_config")
    try:
        config = load_json_text(text, "hf_config")
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", field="hf_config"
        ) from None
    if not isinstance(config, dict):
        raise SpecError("config.json must be a JSON object", field="hf_config")
    return config


def error_field(field_name: str | None, values: Mapping[str, Any]) -> str | None:
    """The form input an error belongs to (``model.hidden_size`` -> the model picker)."""
    if field_name is None:
        return None
    if field_name.startswith("model") or field_name == "hf_config":
        return "hf_config" if values.get("model_source") == "hf_config" else "model"
    if field_name in ("num_gpus_options",) or (
        field_name == "num_gpus" and not values.get("num_gpus") and values.get("num_nodes")
    ):
        return "num_nodes" if field_name == "num_gpus" else "num_gpus"
    if field_name in ("global_batch_size_options",):
        return "global_batch_size"
    return memory_form.error_input(field_name)


def values_from_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The form's values for a request made earlier (to show it again beside its results)."""
    values: dict[str, Any] = dict(DEFAULTS)
    for key, value in request.items():
        if isinstance(value, list) and key not in ("recompute", "optimizer_sharding"):
            values[key] = ",".join(str(v) for v in value)
        elif isinstance(value, dict):
            continue
        elif isinstance(value, bool):
            values[key] = value
        else:
            values[key] = value if isinstance(value, list) else str(value)
    values.update(memory_form.memory_form_values(request))
    values.update(stack_form.stack_form_values(request))
    model = request.get("model")
    if isinstance(model, dict):
        values["model_source"] = "hf_config"
        values["model"] = ""
        values["hf_config"] = json.dumps(model.get("hf_config", model), indent=1)
    return values
