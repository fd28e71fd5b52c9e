"""Every check the plan form can make before a search, reported all at once in plain words.

The page's script (``static/form.js``) makes the same checks from the ``data-`` attributes the
form's inputs carry (:func:`input_rules`), so most mistakes are flagged before a round trip;
the server repeats them (a page without script, or a crafted POST) and then adds the request
schema's own errors, every field at once (:func:`request_errors`). The bounds are the API's:
read from ``PlanJobCreate``'s fields, never restated here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import models_db
from app.planning import axis_rules
from app.planning.schemas import PlanJobCreate
from app.web import forms, memory_form, numbers, stack_form, wording
from planner.specs import SpecError

LABELS = {
    "model": "Model",
    "hf_config": "config.json",
    "gpu": "GPU type",
    "num_gpus": "Number of GPUs",
    "num_nodes": "Number of nodes",
    "gpus_per_node": "GPUs per node",
    "seq_length": "Sequence length",
    "global_batch_size": "Global batch size",
    "top_k": "Plans to show",
    "token_budget": "Token budget",
    "usd_per_gpu_hour": "Price per GPU-hour",
}
LABELS |= dict(forms.MAX_FIELDS) | dict(forms.AXIS_FIELDS)
PAGE_LABELS = LABELS | {i.name: i.label for i in stack_form.INPUTS} | memory_form.TEXT_LABELS
"""Every input's label, for messages that name a request field."""
REQUIRED = {
    "seq_length": "Give the sequence length in tokens (e.g. 4096).",
    "global_batch_size": "Give the global batch size in sequences (e.g. 1024).",
    "num_gpus": "Give the number of GPUs (or of nodes).",
}
"""Required number inputs and what the page says when one is empty."""
WHOLE: tuple[str, ...] = ("num_gpus", "num_nodes", "gpus_per_node", "seq_length")
WHOLE += ("global_batch_size", "top_k", *(name for name, _ in forms.MAX_FIELDS))
DECIMAL = ("token_budget", "usd_per_gpu_hour")
AXES = tuple(name for name, _ in forms.AXIS_FIELDS)
"""Search axes: one whole number fixes one, a list ("1,2,4") or range ("1-8") lists them."""
SCHEMA_NAME = {"num_nodes": "num_gpus"}
_SCHEMA: dict[str, Any] = PlanJobCreate.model_json_schema()["properties"]
"""Inputs bounded by another request field (a node count is at most the GPU bound)."""


def bounds(name: str) -> tuple[float | None, float | None]:
    """(lowest, highest) the API accepts for a request field, from its JSON schema (an
    exclusive lower bound of a whole field is reported as the next whole value)."""
    prop = _SCHEMA.get(SCHEMA_NAME.get(name, name)) or {}
    low: float | None = None
    high: float | None = None
    for part in [prop, *prop.get("anyOf", []), *prop.get("items", {}).get("anyOf", [])]:
        if "minimum" in part:
            low = float(part["minimum"])
        if "exclusiveMinimum" in part:
            low = float(part["exclusiveMinimum"]) + (1 if name in WHOLE + AXES else 0)
        if "maximum" in part:
            high = float(part["maximum"])
    return low, high


def _number_text(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:g}"


def input_rules(name: str) -> dict[str, str]:
    """The ``data-`` attributes the page's script checks an input with."""
    low, high = bounds(name)
    rules = {"data-label": LABELS.get(name, name.replace("_", " ").capitalize())}
    rules["data-kind"] = "whole" if name in WHOLE + AXES else "decimal"
    if name in REQUIRED:
        rules["data-required"] = REQUIRED[name]
    if name in forms.RANGE_INPUTS or name in AXES:
        rules["data-lists"] = "1"  # "64-512" and "8,16" are the planning layer's to parse
    if low is not None:
        rules["data-min"] = _number_text(low).replace(",", "")
    if high is not None:
        rules["data-max"] = _number_text(high).replace(",", "")
    return rules


def all_input_rules() -> dict[str, dict[str, str]]:
    """:func:`input_rules` of every number input of the form, by name."""
    return {name: input_rules(name) for name in WHOLE + DECIMAL + AXES}


def is_whole(text: str) -> bool:
    """Digits 0-9 only: ``str.isdigit`` also takes '²' and '٣', which ``int`` then refuses or
    reads as another number than the one shown (:mod:`app.web.numbers`)."""
    return numbers.read_whole(text) is not None


def check_number(name: str, text: str, errors: dict[str, str]) -> float | None:
    label = LABELS.get(name, name)
    value = numbers.read_decimal(text)  # ASCII only: not '٣', '1_000', 'inf' or '1e999'
    if value is None:
        errors[name] = numbers.refusal(label, text, whole=name in WHOLE + AXES)
        return None
    if name in WHOLE + AXES and value != int(value):
        errors[name] = f"{label} must be a whole number; you typed {text!r}."
        return None
    low, high = bounds(name)
    prop = _SCHEMA.get(name) or {}
    above = name not in WHOLE + AXES and any(
        "exclusiveMinimum" in part for part in [prop, *prop.get("anyOf", [])]
    )
    if above and low is not None and value <= low:  # a price: more than 0, so 0 is out too
        most = f" and at most {_number_text(high)}" if high is not None else ""
        errors[name] = f"{label} must be more than {_number_text(low)}{most}."
        return None
    if (low is not None and value < low) or (high is not None and value > high):
        span = f"between {_number_text(low or 0)} and {_number_text(high)}" if high else ""
        errors[name] = f"{label} must be {span or f'at least {_number_text(low or 0)}'}."
        return None
    return value


def check_values(values: Mapping[str, Any]) -> dict[str, str]:
    """Every empty required field, every number out of range and every conflict, at once."""
    errors: dict[str, str] = {}

    def text(name: str) -> str:
        return str(values.get(name) or "").strip()

    if values.get("model_source") == "hf_config":
        if not text("hf_config"):
            errors["hf_config"] = "Paste the model's config.json (or pick a catalog model)."
    elif not text("model"):
        errors["model"] = "Choose a model."
    if not text("cluster") and not text("gpu"):
        errors["gpu"] = "Choose a GPU type (or a cluster)."
    if not text("num_gpus") and not text("num_nodes"):
        errors["num_gpus"] = REQUIRED["num_gpus"]
    if not text("seq_length"):
        errors["seq_length"] = REQUIRED["seq_length"]
    if not text("global_batch_size") and text("question") in ("", "best"):
        errors["global_batch_size"] = REQUIRED["global_batch_size"]
    numbers: dict[str, float | None] = {}
    for name in WHOLE + DECIMAL:
        if text(name) and not (
            name == "num_gpus" and not is_whole(text(name)) and "-" in text(name)
        ):
            numbers[name] = check_number(name, text(name), errors)
    for name in AXES:
        _check_axis(name, text(name).replace(" ", ""), errors)
    gpus, nodes, per_node = (numbers.get(n) for n in ("num_gpus", "num_nodes", "gpus_per_node"))
    if text("cluster"):  # the cluster's own GPUs per node apply; the server checks them
        per_node = None
    if gpus and nodes and per_node and gpus != nodes * per_node:
        both = (
            f"{_number_text(gpus)} GPUs is not {_number_text(nodes)} nodes of "
            f"{_number_text(per_node)}: give one of the two, or make them agree."
        )
        errors["num_gpus"] = errors["num_nodes"] = both
    if gpus and per_node and not nodes and gpus > per_node and gpus % per_node:
        errors["num_gpus"] = (
            f"{_number_text(gpus)} GPUs do not fill whole nodes of {_number_text(per_node)}: "
            "use a multiple of GPUs per node."
        )
    errors.update(_model_conflicts(values))
    return errors


def _check_axis(name: str, text: str, errors: dict[str, str]) -> None:
    """A search axis: one whole number in the API's range, or whole numbers in a list/range."""
    if not text:
        return
    pieces = re.split(r"[,-]", text) if "," in text or "-" in text[1:] else [text]
    if len(pieces) == 1:
        check_number(name, text, errors)
    elif not all(is_whole(piece) for piece in pieces):
        errors[name] = (
            f"{LABELS[name]} must be whole numbers: one (4), a list (1,2,4) or a range (1-8); "
            f"you typed {text!r}."
        )


def _model_conflicts(values: Mapping[str, Any]) -> dict[str, str]:
    """A fixed TP that cannot split a catalog model's attention heads (Megatron's rule 17),
    flagged before a search that would reject every layout for it."""
    tp, slug = str(values.get("tp") or "").strip(), str(values.get("model") or "")
    if values.get("model_source") == "hf_config" or not is_whole(tp) or not slug:
        return {}
    try:
        model = models_db.load_model(slug)
    except SpecError:  # a user's model or an unknown name: the planning layer says which
        return {}
    conflict = axis_rules.tp_conflict(model, int(tp)) if int(tp) >= 1 else None
    if conflict is None:
        return {}
    divisors = ", ".join(str(d) for d in conflict.valid if d <= 64)
    heads = conflict.heads
    return {"tp": f"TP {tp} does not divide the {heads} attention heads of {slug}: use {divisors}."}


def request_errors(exc: Exception, values: Mapping[str, Any]) -> dict[str, str]:
    """A planning-layer error as {form input: message}: every field of a RequestError."""
    listed = getattr(exc, "errors", None) or [
        {"field": getattr(exc, "field", None), "message": str(getattr(exc, "message", exc))}
    ]
    out: dict[str, str] = {}
    for item in listed:
        name = forms.error_field(item.get("field"), values)
        if name and name not in out:
            out[name] = _plain(str(item.get("message", "")), item.get("field"))
    return out


def _plain(message: str, field: str | None) -> str:
    """A planning-layer message in the form's words (labels, readable bounds)."""
    return wording.plain(message, field, PAGE_LABELS)
