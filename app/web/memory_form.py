"""The plan form's memory settings and question (issue 13): the request's fields, by name.

Selects and inputs carry the request field names (``grad_reduce_dtype``, ``recompute_modules``,
``optimizer_offload_fraction``...), so an error from the planning layer lands on its input; the
question select becomes ``maximize`` / ``minimize``. Only syntax is checked here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.web import numbers
from planner.specs import SpecError

DTYPE_OPTIONS = (("fp32", "fp32"), ("bf16", "bf16 (changes numerics)"),
                 ("fp32,bf16", "search both"))  # fmt: skip
FP8_GATHER_OPTIONS = {"auto": None, "on": True, "off": False}
CUDA_GRAPH_OPTIONS = ("auto", "none", "partial", "full_iteration")  # auto: the planner chooses
RECOMPUTE_MODULE_OPTIONS = (
    "core_attn", "mlp", "moe_act", "layernorm", "mla_up_proj", "moe", "shared_experts"
)  # fmt: skip
OFFLOAD_MODULE_OPTIONS = (
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"
)  # fmt: skip
QUESTIONS = (
    ("best", "the best layouts"),
    ("maximize:seq_length", "the longest sequence that fits"),
    ("maximize:micro_batch_size", "the largest micro-batch that fits"),
    ("minimize:num_gpus", "the fewest GPUs that fit (up to the GPUs given)"),
)
MEMORY_FIELDS = (
    "grad_reduce_dtype", "optimizer_state_dtype", "allow_numerics_changes", "fp8_param_gather",
    "recompute_modules", "search_recompute_modules", "recompute_num_layers", "cuda_graphs",
    "activation_offload_layers", "optimizer_offload_fraction", "pipeline_layout",
    "auto_pipeline_layout", "question", "activation_offload_modules", "search_activation_offload",
)  # fmt: skip
CHECKBOXES = ("allow_numerics_changes", "search_recompute_modules", "auto_pipeline_layout",
              "search_activation_offload")  # fmt: skip
DEFAULTS: dict[str, Any] = {"grad_reduce_dtype": "fp32", "optimizer_state_dtype": "fp32",
                            "fp8_param_gather": "auto", "cuda_graphs": "auto",
                            "recompute_modules": [], "activation_offload_modules": [],
                            "question": "best"}  # fmt: skip
MULTI = {"recompute_modules": RECOMPUTE_MODULE_OPTIONS,
         "activation_offload_modules": OFFLOAD_MODULE_OPTIONS}  # fmt: skip


TEXT_LABELS = {
    "recompute_num_layers": "Full recompute: layers per chunk",
    "activation_offload_layers": "Activation offload layers",
    "optimizer_offload_fraction": "Optimizer offload fraction",
}
"""The typed fields' labels on the form (_memory_fields.html), for their messages."""


def memory_values(form: Mapping[str, Any], multi: Mapping[str, list[str]]) -> dict[str, Any]:
    """The checkbox groups and switches of the posted form, as the form shows them again."""
    values: dict[str, Any] = {name: list(multi.get(name, [])) for name in MULTI}
    for name in CHECKBOXES:
        values[name] = name in form
    return values


def memory_request(values: Mapping[str, Any]) -> dict[str, Any]:
    """The memory fields and the question of a plan request, from the form's values."""
    req: dict[str, Any] = {}
    for name in ("grad_reduce_dtype", "optimizer_state_dtype"):
        text = str(values.get(name) or "fp32")
        if text != "fp32":
            req[name] = text.split(",")
    gather = str(values.get("fp8_param_gather") or "auto")
    if gather not in FP8_GATHER_OPTIONS:
        raise SpecError("choose auto, on or off", field="fp8_param_gather")
    if FP8_GATHER_OPTIONS[gather] is not None:
        req["fp8_param_gather"] = FP8_GATHER_OPTIONS[gather]
    for name, options in MULTI.items():
        modules = [m for m in values.get(name) or [] if m in options]
        if modules:
            req[name] = modules
    graphs = str(values.get("cuda_graphs") or "auto")
    if graphs != "auto":  # auto: unset, the search chooses (planner.search.stack_choice)
        req["cuda_graphs"] = graphs
    for name, least in (("recompute_num_layers", 1), ("activation_offload_layers", 0)):
        text = str(values.get(name, "")).strip()
        if text:
            # digits 0-9 only ('²' passes isdigit); the least value is the request schema's
            if numbers.read_whole(text) is None:
                message = (
                    f"{TEXT_LABELS[name]} must be a whole number, {least} or more; got {text!r}"
                )
                raise SpecError(message, field=name)
            req[name] = int(text)
    fractions = str(values.get("optimizer_offload_fraction", "")).replace(" ", "")
    if fractions:
        read = [numbers.read_decimal(x) for x in fractions.split(",") if x]
        if any(x is None for x in read):  # ASCII decimal only (app/web/numbers.py)
            raise SpecError(
                f"{TEXT_LABELS['optimizer_offload_fraction']} must be numbers from 0 to 1 "
                "in ASCII digits (0 or a list: 0,0.5), "
                f"got {fractions!r}",
                field="optimizer_offload_fraction",
            )
        req["optimizer_offload_fraction"] = read
    layout = str(values.get("pipeline_layout", "")).strip()
    if layout:
        req["pipeline_layout"] = layout
    for name in CHECKBOXES:
        if values.get(name):
            req[name] = True
    question = str(values.get("question") or "best")
    if question not in dict(QUESTIONS):
        raise SpecError("choose one of the questions", field="question")
    if question != "best":
        kind, _, target = question.partition(":")
        req[kind] = target
    return req


def memory_form_values(request: Mapping[str, Any]) -> dict[str, Any]:
    """The memory part of the form for a request made earlier."""
    values: dict[str, Any] = {}
    for name in ("grad_reduce_dtype", "optimizer_state_dtype"):
        if isinstance(request.get(name), list):
            values[name] = ",".join(request[name])
    gather = request.get("fp8_param_gather")
    values["fp8_param_gather"] = "auto" if gather is None else ("on" if gather else "off")
    for name in MULTI:
        values[name] = list(request.get(name) or [])
    for kind in ("maximize", "minimize"):
        if request.get(kind):
            values["question"] = f"{kind}:{request[kind]}"
    return values


def is_memory_error(name: str) -> bool:
    """An error on one of these fields opens the Advanced section."""
    return name in MEMORY_FIELDS or name in ("maximize", "minimize")


def error_input(name: str) -> str:
    """The input of a field's error: maximize and minimize are the question select."""
    head = name.partition(".")[0]
    return "question" if head in ("maximize", "minimize") else head
