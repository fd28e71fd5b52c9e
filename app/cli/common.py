"""Helpers shared by the CLI commands: errors to stderr with a non-zero exit, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

err_console = Console(stderr=True, soft_wrap=True)  # one error, one line


def out_console() -> Console:
    """Console for tables: full width on a terminal; wide enough when piped to a file."""
    return Console() if sys.stdout.isatty() else Console(width=200)


EXIT_BAD_INPUT = 2
EXIT_NOTHING_FEASIBLE = 3


def fail(message: str, *, field: str | None = None, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print the error naming the flag to fix (``--num-gpus``) and exit with ``code``."""
    flag = None
    if field:
        from app.planning.convert import flag_label

        # an option's field becomes its flag; a positional argument is named as usage shows it
        flag = field if field.startswith("--") or field.isupper() else flag_label(field)
    where = f" (field: {flag})" if flag and not message.startswith(flag) else ""
    err_console.print(f"[bold red]error:[/] {message}{where}", highlight=False, markup=True)
    raise SystemExit(code)


def log_levels(*extra: str) -> Callable[[str], str]:
    """A ``--log-level`` check (any case): a usage error naming the levels, where an unknown
    one was a traceback from ``logging`` or uvicorn (``extra``: uvicorn's ``trace``)."""
    levels = (*extra, "debug", "info", "warning", "error", "critical")

    def check(value: str) -> str:
        if value.lower() not in levels:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(levels)}")
        return value.lower()

    return check


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")


def gib(value: float | None) -> str:
    from app.core.units import GIB

    return "-" if value is None else f"{value / GIB:.1f}"


def request_from_options(**options: Any) -> dict[str, Any]:
    """The request dict for the given command-line options (unset options left out)."""
    return {k: v for k, v in options.items() if v is not None}


def inline_model_file(ref: object) -> object:
    """A --model that names a local spec or config.json file, read here into an inline object.

    The planning layer itself takes only catalog slugs and inline objects, so that the service
    never opens a file named in a request.
    """
    if not isinstance(ref, str) or not (ref.endswith((".json", ".yaml", ".yml")) or "/" in ref):
        return ref
    path = Path(ref).expanduser()
    if not path.is_file():
        if "/" in ref or path.suffix in (".json", ".yaml", ".yml"):  # meant as a file
            fail(
                f"cannot read {ref}: no such file; give a catalog slug (planner catalog list "
                "models) or the path of a model spec or config.json",
                field="model",
            )
        return ref
    import models_db
    from planner.specs import SpecError

    try:
        return models_db.resolve_model(path).to_dict()
    except SpecError as exc:
        named = str(path) in exc.message  # the catalog's reader may name the file itself
        fail(exc.message if named else f"{path}: {exc.message}", field="model")


# options shared by `evaluate`, `plan` and the commands built like them
ModelOpt = Annotated[str | None, typer.Option(help="Catalog slug, spec/config.json path.")]
GpuOpt = Annotated[str | None, typer.Option(help="GPU slug or alias, e.g. h100-sxm-80gb, h100.")]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        help="Cluster: a preset (dgx-h100) or a user cluster in the server's database; sets "
        "the GPU and node size, and its newest calibration becomes the profile."
    ),
]
ProfileOpt = Annotated[
    Path | None,
    typer.Option(help="Fitted profile JSON (`planner calibrate --output`) to predict with."),
]
GpusPerNodeOpt = Annotated[int | None, typer.Option(help="GPUs per node (default: preset's).")]
GpuMemoryOpt = Annotated[float | None, typer.Option(help="Override GPU memory (GiB).")]
SeqLengthOpt = Annotated[int | None, typer.Option(help="Tokens per sequence, e.g. 8192.")]
PrecisionOpt = Annotated[str | None, typer.Option(help="bf16, fp8 or fp16.")]
ThresholdOpt = Annotated[
    float | None,
    typer.Option(help="Largest share of GPU memory a layout's estimate may use, 0-1 (0.8)."),
]
DispatcherOpt = Annotated[
    str | None,
    typer.Option(help="MoE dispatcher: alltoall or flex (DeepEP); default: flex across nodes."),
]
A2AOverlapOpt = Annotated[
    bool | None,
    typer.Option(
        "--moe-a2a-overlap/--no-moe-a2a-overlap",
        help="MoE all-to-all overlap (default: on where Megatron allows it).",
    ),
]
