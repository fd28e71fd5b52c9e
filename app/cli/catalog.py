"""``planner catalog list|show``: the built-in models, GPUs and cluster presets."""

from __future__ import annotations

from typing import Annotated

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
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List catalog entries."""
    import models_db

    if kind not in KINDS:
        fail(f"kind {kind!r} is not one of {', '.join(KINDS)}", field="kind")
    if kind == "models":
        rows = [models_db.load_model(slug).to_dict() for slug in models_db.list_models()]
        columns = ("name", "num_layers", "hidden_size", "num_attention_heads", "num_experts")
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


def _preset_dict(slug: str) -> dict[str, object]:
    import dataclasses

    import models_db

    preset = models_db.load_cluster_preset(slug)
    return dataclasses.asdict(preset) if dataclasses.is_dataclass(preset) else dict(preset)  # type: ignore[arg-type, call-overload]


@catalog_cli.command("show")
def show(slug: Annotated[str, typer.Argument(help="A model, GPU or cluster slug.")]) -> None:
    """Show one entry with the source of every number, as JSON."""
    import models_db
    from planner.specs import SpecError

    if slug in models_db.list_models():
        data = models_db.load_model(slug).to_dict()
        data["metadata"] = models_db.model_metadata(slug)
    elif slug in models_db.list_gpus():
        data = models_db.load_gpu(slug).to_dict()
    elif slug in models_db.list_clusters():
        data = _preset_dict(slug)
    else:
        try:
            models_db.load_model(slug)  # raises with close matches
        except SpecError as exc:
            fail(exc.message, field="slug")
        fail(f"unknown slug {slug!r}", field="slug")
    print_json(data)
