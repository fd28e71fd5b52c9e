"""The scaling page's form: its fields, and every mistake in it at once under its own field.

The same checks and words as the plan form (``form_checks``: the API schema's bounds, the
fields' labels), plus the list of GPU counts ("64-1024" or "64,96,128"); a request error from
the planning layer (one per field) is put under its field in the page's words (``wording``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.planning.schemas import MAX_GPUS
from app.web import form_checks, wording
from planner.specs import SpecError

FIELDS = {
    "model": ("llama3.1-70b", "Model"),
    "gpu": ("h100-sxm-80gb", "GPU"),
    "num_gpus": ("64-1024", "GPU counts (64-1024 or 64,96,128)"),
    "seq_length": ("8192", "Sequence length"),
    "global_batch_size": ("1024", "Global batch size"),
    "token_budget": ("", "Token budget (optional)"),
    "usd_per_gpu_hour": ("", "$ per GPU-hour (optional)"),
}
"""Each input: (default, label), in the page's order."""
NUMBERS = ("seq_length", "global_batch_size", "token_budget", "usd_per_gpu_hour")
REQUIRED = {
    "seq_length": form_checks.REQUIRED["seq_length"],
    "global_batch_size": form_checks.REQUIRED["global_batch_size"],
    "num_gpus": "Give the GPU counts: a range (64-1024) or a list (64,96,128).",
}
PAGE_FIELD = {"num_gpus_options": "num_gpus"}
"""A request field the page shows under another input."""


def shown_values(query: Mapping[str, str]) -> dict[str, str]:
    """The values to show: what the URL says, else the defaults."""
    return {name: str(query.get(name, default)).strip() for name, (default, _) in FIELDS.items()}


def check(
    shown: Mapping[str, str], models: list[str], gpus: list[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """(the scaling request, {input: message}); every bad input is named, all at once."""
    from app.planning.convert import int_list

    errors: dict[str, str] = {}
    for name, choices, word in (("model", models, "model"), ("gpu", gpus, "GPU type")):
        if not shown[name]:
            errors[name] = f"Choose a {word}."
        elif choices and shown[name] not in choices:
            errors[name] = f"{shown[name]!r} is not in the catalog: choose a {word} from the menu."
    request: dict[str, Any] = {"model": shown["model"], "gpu": shown["gpu"]}
    for name in NUMBERS:
        if not shown[name]:
            if name in REQUIRED:
                errors[name] = REQUIRED[name]
            continue
        value = form_checks.check_number(name, shown[name], errors)
        if value is not None:
            request[name] = int(value) if name in form_checks.WHOLE else value
    if not shown["num_gpus"]:
        errors["num_gpus"] = REQUIRED["num_gpus"]
    else:
        try:
            request["num_gpus_options"] = int_list(shown["num_gpus"], "num_gpus", maximum=MAX_GPUS)
        except SpecError:
            errors["num_gpus"] = (
                f"GPU counts must be whole numbers from 1 to {MAX_GPUS:,}: a range (64-1024) "
                f"or a list (64,96,128); you typed {shown['num_gpus']!r}."
            )
    return request, errors


def plain(message: str, field: str | None) -> str:
    """A planning-layer message in the page's words (labels, readable bounds)."""
    labels = form_checks.PAGE_LABELS | {"num_gpus": "GPU counts", "num_gpus_options": "GPU counts"}
    return wording.plain(message, field, labels)


def request_errors(exc: SpecError) -> tuple[dict[str, str], str | None]:
    """({input: message}, a message that names no input) of a planning-layer error."""
    listed = getattr(exc, "errors", None) or [{"field": exc.field, "message": exc.message}]
    errors: dict[str, str] = {}
    general: list[str] = []
    for item in listed:
        field = str(item.get("field") or "")
        name = PAGE_FIELD.get(field, "model" if field.startswith("model") else field)
        text = plain(str(item.get("message", "")), field or None)
        if name in FIELDS:
            errors.setdefault(name, text)
        else:
            general.append(text)
    return errors, "; ".join(general) or None
