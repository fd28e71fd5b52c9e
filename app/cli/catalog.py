"""``planner catalog list|show``: the built-in models, GPUs and cluster presets."""

from __future__ import annotations

import difflib
from typing import Annotated, Any

import typer
from rich.table import Table

from app.cli.common import fail, out_console, print_json
from app.core.units import GIB

catalog_cli = typer.Typer(help="Built-in models, GPUs and cluster presets.", no_args_is_help=True)
KINDS = ("models", "gpus", "clusters")


def register(cli: typer.Typer) -> None:
    cli.add_typer(catalog_cli, name="catalog")


@catalog_cli.command("list")
def list_entries(
    kind: Annotated[str, typer.Argument(help="models, gpus or clusters.")] = "models",
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List catalog entries."""
    import models_db

    if kind not in KINDS:
        fail(f"kind {kind!r} is not one of {', '.join(KINDS)}", field="kind")
    if kind == "models":
        rows = [models_db.load_model(slug).to_dict() for slug in models_db.list_models()]
        columns: tuple[str, ...] = (
            "name",
            "num_layers",
            "hidden_size",
            "num_attention_heads",
            "num_experts",
        )
    elif kind == "gpus":
        rows = [models_db.load_gpu(slug).to_dict() for slug in models_db.list_gpus()]
        for row in rows:
            row["memory_gib"] = round(row["hbm_bytes"] / GIB, 1)
            row["bf16_tflops"] = round(row["peak_bf16_flop_per_s"] / 1e12)
        columns = ("name", "memory_gib", "bf16_tflops", "architecture")
    else:
        rows = [_preset_dict(slug) for slug in models_db.list_clusters()]
        columns = ("name", "gpu", "gpus_per_node")
    if json_output:
        print_json(rows)
        return
    table = Table(title=f"Catalog: {kind}", header_style="bold")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("-" if row.get(c) is None else str(row.get(c)) for c in columns))
    out_console().print(table)


def _preset_dict(slug: str) -> dict[str, Any]:
    import models_db

    preset = models_db.load_cluster_preset(slug)
    return preset.to_dict()


@catalog_cli.command("show")
def show(
    slug: Annotated[str, typer.Argument(help="A model, GPU or cluster slug (or a GPU alias).")],
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show one entry: each number with its source (a table; --json for machines)."""
    data, kind = _entry(slug)
    if json_output:
        print_json(data)
        return
    _print_entry(data, kind)


def _entry(slug: str) -> tuple[dict[str, Any], str]:
    import models_db
    from app.catalog.names import cluster_slug_for, gpu_slug_for
    from planner import SpecError

    if slug in models_db.list_models():
        data = models_db.load_model(slug).to_dict()
        data["metadata"] = models_db.model_metadata(slug)
        return data, "model"
    try:
        return models_db.load_gpu(gpu_slug_for(slug)).to_dict(), "GPU"
    except SpecError:
        pass
    try:
        return _preset_dict(cluster_slug_for(slug)), "cluster"
    except SpecError:
        pass
    known = models_db.list_models() + models_db.list_gpus() + models_db.list_clusters()
    close = [k for k in known if k.startswith(slug.lower())][:3]
    close = close or difflib.get_close_matches(slug.lower(), known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    fail(f"unknown model, GPU or cluster {slug!r}{hint} (`planner catalog list models`)")


def _print_entry(data: dict[str, Any], kind: str) -> None:
    from rich.table import Table

    sources = data.get("sources") or {}
    metadata = data.get("metadata") or {}
    title = metadata.get("display_name") or data.get("name")
    table = Table(title=f"{kind}: {title}", header_style="bold", title_justify="left")
    for column in ("field", "value", "source"):
        table.add_column(column, overflow="fold")
    for key, value in data.items():
        if key in ("sources", "metadata") or value is None:
            continue
        shown = f"{value / GIB:,.1f} GiB ({value:,})" if key.endswith("_bytes") else str(value)
        table.add_row(key, shown, str(sources.get(key, "")))
    for key, value in metadata.items():
        table.add_row(key, str(value), "")
    if sources.get("all"):
        table.caption = f"all numbers: {sources['all']}"
    out_console().print(table)
