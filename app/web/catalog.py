"""Catalog pages: models (with a pasted config.json parsed into a spec), GPUs, clusters."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.catalog.network import TOPOLOGY_LABELS
from app.core.schemas import SLUG_PATTERN
from app.input_policy import load_json_text
from app.web.backend import Backend
from app.web.present import fmt_gib
from app.web.templating import templates
from planner.specs import SpecError

router = APIRouter(include_in_schema=False)

MODEL_COLUMNS = (
    ("slug", "Model"),
    ("num_layers", "Layers"),
    ("hidden_size", "Hidden"),
    ("ffn_hidden_size", "FFN"),
    ("num_attention_heads", "Heads"),
    ("num_query_groups", "KV groups"),
    ("vocab_size", "Vocab"),
    ("num_experts", "Experts"),
    ("moe_router_topk", "Top-k"),
    ("max_position_embeddings", "Max positions"),
    ("builtin", "Built-in"),
)
GPU_COLUMNS = (
    ("slug", "GPU"),
    ("hbm_bytes", "HBM"),
    ("hbm_bandwidth_bytes_per_s", "HBM bandwidth"),
    ("peak_bf16_flop_per_s", "Peak BF16"),
    ("peak_fp8_flop_per_s", "Peak FP8"),
    ("intra_node_bandwidth_bytes_per_s", "Intra-node link"),
    ("builtin", "Built-in"),
)
CLUSTER_COLUMNS = (
    ("slug", "Cluster"),
    ("gpu", "GPU"),
    ("gpus_per_node", "GPUs per node"),
    ("inter_node_bandwidth_bytes_per_s", "Inter-node bandwidth per GPU"),
    ("nics_per_node", "NICs per node"),
    ("nic_bandwidth_bytes_per_s", "NIC rate"),
    ("intra_node_topology", "Inside a node"),
    ("inter_node_latency_s", "Inter-node latency"),
    ("intra_node_latency_s", "Intra-node latency"),
    ("builtin", "Built-in"),
)


def _fmt(key: str, value: Any) -> str:
    """SI values rendered in the units people read (GiB, TB/s, TFLOP/s, GB/s)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "intra_node_topology":
        return TOPOLOGY_LABELS.get(str(value), str(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if key.endswith("_bytes"):
            return fmt_gib(value, from_bytes=True)  # one decimal, as on every page
        if key.endswith("flop_per_s"):
            return f"{value / 1e12:,.0f} TFLOP/s"
        if key.endswith("bytes_per_s"):
            return f"{value / 1e9:,.0f} GB/s"
        if key.endswith("_s"):
            return f"{value * 1e6:,.1f} µs"
        if isinstance(value, float):
            return f"{value:,.4g}"
        return f"{value:,}"
    return str(value)


def _table(
    rows: list[dict[str, Any]], columns: tuple[tuple[str, str], ...] | None
) -> tuple[list[str], list[list[str]]]:
    if columns is None:
        keys = list(dict.fromkeys(k for r in rows for k in r if k != "sources"))
        columns = tuple((k, k.replace("_", " ")) for k in keys)
    head = [title for _, title in columns]
    body = [[_fmt(k, r.get(k)) for k, _ in columns] for r in rows]
    return head, body


def page(
    request: Request,
    backend: Backend,
    kind: str,
    extra: dict[str, Any] | None = None,
    status_code: int = 200,
) -> Response:
    titles = {
        "models": "Models",
        "gpus": "GPU types",
        "clusters": "Clusters: built-in presets and your own",
    }
    columns = {"models": MODEL_COLUMNS, "gpus": GPU_COLUMNS, "clusters": CLUSTER_COLUMNS}.get(kind)
    error = None
    try:
        rows = backend.catalog_rows(kind)
        for row in rows:  # top-k means nothing without experts
            if kind == "models" and not row.get("num_experts"):
                row["moe_router_topk"] = None
        head, body = _table(rows, columns)
    except (ImportError, AttributeError) as exc:  # catalog not installed in this build
        rows, head, body, error = [], [], [], f"The catalog is not available: {exc}"
    deleted = request.query_params.get("deleted", "")
    ctx = {
        "deletable": [r["slug"] for r in rows if not r.get("builtin")] if not error else [],
        "deleted": deleted if re.match(SLUG_PATTERN, deleted) else None,
        "pending": None,
        "delete_error": None,
        "title": titles[kind],
        "kind": kind,
        "head": head,
        "body": body,
        "nav": kind,
        "catalog_error": error,
        "config_text": "",
        "parsed": None,
        "config_error": None,
    }
    ctx |= extra or {}
    if kind == "clusters" and "cluster_form" not in ctx:  # every clusters page has the form
        from app.web import cluster_form

        ctx |= cluster_form.context(backend)
    if kind == "gpus" and "gpu_form" not in ctx and not error:  # and the GPU page its own
        from app.web import gpu_form

        ctx |= gpu_form.context(backend)
    return templates(request.app).TemplateResponse(
        request, "catalog.html", ctx, status_code=status_code
    )


@router.get("/catalog/models", response_class=HTMLResponse)
def catalog_models(request: Request, backend: Backend) -> Response:
    added = request.query_params.get("added", "")  # where "Parse and add" lands (a 303)
    row = next((r for r in backend.catalog_rows("models") if r["slug"] == added), None)
    if row is None or row.get("builtin"):
        return page(request, backend, "models")
    spec = {k: v for k, v in row.items() if k not in ("slug", "builtin", "name")}
    extra = {"parsed": _spec_rows(spec), "parsed_name": added, "stored": True}
    return page(request, backend, "models", extra)


SPEC_HELP = {  # the attention/activation variants a config.json sets (catalog-facts §1.3, §1.6)
    "window_size": "Sliding window [left, right] (--window-size): a query sees itself and "
    "`left` previous tokens; HF sliding_window 128 is [127, 0]. null: full attention.",
    "window_attn_skip_freq": "--window-attn-skip-freq N: N-1 windowed layers then one full "
    "layer (gpt-oss: 2). null: every layer windowed when a window is set.",
    "softmax_type": "--softmax-type: 'learnable' = one learned attention sink per query head "
    "(gpt-oss), 'off-by-one' = a constant 1 in the softmax denominator, 'vanilla' = none.",
    "quick_geglu": "--quick-geglu: gated quick-GELU MLP, 3 matrices like SwiGLU (gpt-oss).",
    "squared_relu": "--squared-relu: squared-ReLU MLP, not gated (2 matrices).",
    "glu_linear_offset": "--glu-linear-offset: act(gate) x (linear + offset); gpt-oss 1.0.",
    "activation_func_clamp_value": "--activation-func-clamp-value: clamp of the quick-GeGLU "
    "input; gpt-oss 7.0. null: no clamp.",
}


def _spec_rows(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(k, json.dumps(v), SPEC_HELP.get(k, "")) for k, v in spec.items() if k != "sources"]


@router.post("/catalog/models", response_class=HTMLResponse)
async def parse_model(request: Request, backend: Backend) -> Response:
    form = await request.form()
    text = str(form.get("config_json", ""))
    typed = str(form.get("name", "")).strip()  # shown back as typed when the submit fails
    name = typed or "pasted-model"
    try:
        if not text.strip():  # "not valid JSON: Expecting value" says nothing to a first visit
            raise SpecError(
                "paste the model's config.json from Hugging Face (a JSON object such as "
                '{"model_type": "llama", "hidden_size": 4096, ...})',
                field="hf_config",
            )
        config = load_json_text(text, "hf_config")
        if not isinstance(config, dict):
            raise SpecError("config.json must be a JSON object", field="hf_config")
        if form.get("store"):
            if not re.match(SLUG_PATTERN, name):
                raise SpecError(
                    f"name {name[:60]!r}{'...' if len(name) > 60 else ''} must be lower-case "
                    "letters, digits, '.', '_' or '-', at most 128 characters (a slug such as "
                    "my-llama-70b)",
                    field="name",
                )
            spec = backend.store_model(name, config)
        else:
            spec = backend.parse_hf_config(config, name)
    except json.JSONDecodeError as exc:
        return page(
            request,
            backend,
            "models",
            {
                "config_text": text,
                "config_error": f"not valid JSON: {exc.msg} at line "
                f"{exc.lineno}, column {exc.colno}",
                "parsed_name": typed,
            },
            status_code=422,
        )
    except SpecError as exc:
        key = "name_error" if exc.field == "name" else "config_error"
        return page(
            request,
            backend,
            "models",
            {"config_text": text, key: exc.message, "parsed_name": typed},
            status_code=422,
        )
    if form.get("store"):  # POST/redirect/GET: a reload reads the entry, never adds it again
        return RedirectResponse(f"/catalog/models?added={quote(name)}", status_code=303)
    extra = {"config_text": text, "parsed": _spec_rows(spec), "parsed_name": name}
    return page(request, backend, "models", extra | {"stored": False})


@router.get("/catalog/gpus", response_class=HTMLResponse)
def catalog_gpus(request: Request, backend: Backend) -> Response:
    from app.web import gpu_form  # the add/change form (app/web/gpu_form.py)

    edit, copy = request.query_params.get("edit", ""), request.query_params.get("copy", "")
    ctx = gpu_form.edit_context(backend, edit or copy, copy=not edit) if edit or copy else {}
    saved = request.query_params.get("saved", "")
    ctx["saved"] = saved if re.match(SLUG_PATTERN, saved) else None
    return page(request, backend, "gpus", ctx)


@router.get("/catalog/clusters", response_class=HTMLResponse)
def catalog_clusters(request: Request, backend: Backend) -> Response:
    from app.web import cluster_form  # the add/change form (app/web/cluster_form.py)

    edit = request.query_params.get("edit", "")
    ctx = cluster_form.edit_context(backend, edit) if edit else {}  # else the page's new one
    saved = request.query_params.get("saved", "")
    ctx["saved"] = saved if re.match(SLUG_PATTERN, saved) else None
    return page(request, backend, "clusters", ctx)
