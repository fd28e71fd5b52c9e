"""What one search was asked, in a line: the model, the GPUs and the job.

Two searches that differ in one setting (a sequence length of 4 096, then of 32 768) rendered
the same heading ("llama3.1-70b on 64 × h100-sxm-80gb") and the same page title, so a user who
compares them (Back and Forward, two tabs, the browser's history) could not tell which answer
was which. The results' heading, the page titles and the plan pages carry this line instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.web.present import fmt_int


def model_name(request: Mapping[str, Any]) -> str:
    """The catalog slug, or the name of a pasted spec ("your model" when it has none)."""
    model = request.get("model")
    if isinstance(model, Mapping):
        name = model.get("name")
        if name is None and isinstance(model.get("hf_config"), Mapping):
            name = model["hf_config"].get("model_type")
        return str(name) if name else "your model"
    return str(model) if model else "your model"


def hardware(request: Mapping[str, Any]) -> str:
    """'64 × h100-sxm-80gb', or the cluster preset's name when the request names one."""
    where = request.get("gpu") or request.get("cluster") or "GPUs"
    count = request.get("num_gpus")
    return f"{fmt_int(count)} × {where}" if count else str(where)


def settings(request: Mapping[str, Any]) -> list[str]:
    """The job's sizes that change the answer most: sequence, global batch, precision."""
    parts = []
    if request.get("seq_length"):
        parts.append(f"sequence {fmt_int(request['seq_length'])} tokens")
    if request.get("global_batch_size"):
        parts.append(f"global batch {fmt_int(request['global_batch_size'])}")
    if request.get("precision"):
        parts.append(str(request["precision"]))
    return parts


def summary(request: Mapping[str, Any]) -> str:
    """'llama3.1-70b on 64 × h100-sxm-80gb, sequence 32,768 tokens, global batch 1,024, bf16'."""
    head = f"{model_name(request)} on {hardware(request)}"
    return ", ".join([head, *settings(request)])


def page_title(request: Mapping[str, Any], *, finished: bool, status: str = "") -> str:
    """The results page's title: what was asked, and whether the answer is in."""
    if not finished:
        return f"Searching: {summary(request)}"
    prefix = "Plans" if status == "succeeded" else f"Search {status}"
    return f"{prefix}: {summary(request)}"
