"""``planner scale``: the best plan at each GPU count of a range, as a table or JSON.

    planner scale --model llama3.1-70b --gpu h100-sxm-80gb --num-gpus 64-4096 \\
        --seq-length 8192 --global-batch-size 1024 --token-budget 15e12 --usd-per-gpu-hour 2.5
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.cli.common import (
    EXIT_NOTHING_FEASIBLE,
    ClusterOpt,
    GpuOpt,
    GpusPerNodeOpt,
    ModelOpt,
    PrecisionOpt,
    ProfileOpt,
    SeqLengthOpt,
    fail,
    out_console,
    print_json,
)
from app.cli.options import CLUSTER_OPTIONS, STACK_OPTIONS, shared_options
from app.cli.ranges import print_expansions

Opt = typer.Option

if TYPE_CHECKING:
    from app.planning.reports import ScalingCurve


def register(cli: typer.Typer) -> None:
    cli.command("scale")(scale)


@shared_options(STACK_OPTIONS, CLUSTER_OPTIONS)
def scale(
    model: ModelOpt = None,
    gpu: GpuOpt = None,
    cluster: ClusterOpt = None,
    num_gpus: Annotated[
        str | None, Opt(help="GPU counts: a range 64-4096 (powers of two) or a list 64,96,128.")
    ] = None,
    gpus_per_node: GpusPerNodeOpt = None,
    seq_length: SeqLengthOpt = None,
    global_batch_size: Annotated[int | None, Opt(help="Sequences per iteration.")] = None,
    precision: PrecisionOpt = None,
    token_budget: Annotated[float | None, Opt(help="Tokens to train on (time and cost).")] = None,
    usd_per_gpu_hour: Annotated[float | None, Opt(help="Price of one GPU-hour in USD.")] = None,
    max_trials: Annotated[int | None, Opt(help="Sampled trials per GPU count (500).")] = None,
    profile: ProfileOpt = None,
    server: Annotated[str | None, Opt(help="Ask this planner service instead.")] = None,
    api_key: Annotated[str | None, Opt(help="API key, sent as the X-API-Key header.")] = None,
    json_output: Annotated[bool, Opt("--json", help="Print JSON.")] = False,
    **shared: Any,
) -> None:
    """Best plan, tokens/s, scaling efficiency, time to train and cost at each GPU count."""
    from app.cli.requests import build_request
    from app.planning.schemas import ScalingCurveCreate

    given = {**locals(), **shared}
    options = {k: v for k, v in given.items() if k in ScalingCurveCreate.model_fields}
    if isinstance(num_gpus, str) and num_gpus.strip().isdigit():
        options["num_gpus"] = [num_gpus]  # one count is a curve of one point
    if server and profile is not None:
        fail("--profile is for local curves; the server uses its clusters' calibrations")
    typed, run_profile = build_request(
        ScalingCurveCreate, options, profile_file=profile, server_cluster=not server
    )
    if not json_output:
        print_expansions(num_gpus=num_gpus)
    request = typed.model_dump(mode="json", exclude_unset=True)
    curve = _remote(request, server, api_key) if server else _local(request, run_profile)
    if json_output:
        print_json(curve.raw)
    else:
        _print_table(curve)
    if not any(p.feasible for p in curve.points):
        raise SystemExit(EXIT_NOTHING_FEASIBLE)


def _local(request: dict[str, Any], profile: Any) -> ScalingCurve:
    from app.planning.scaling import scaling_curve
    from planner.specs import SpecError

    try:
        return scaling_curve(request, profile=profile)
    except SpecError as exc:
        fail(exc.message, field=exc.field)


def _remote(request: dict[str, Any], server: str, api_key: str | None) -> ScalingCurve:
    from app.planning.schemas import MAX_SCALING_POINTS
    from app.sdk import PlannerClient

    counts = request.get("num_gpus_options") or []
    if not counts or len(counts) > MAX_SCALING_POINTS:
        fail(f"give between 1 and {MAX_SCALING_POINTS} GPU counts", field="num_gpus")
    with PlannerClient(server, api_key=api_key) as client:  # errors: app/cli/errors.py
        return client.scaling_curve(request)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _print_table(curve: ScalingCurve) -> None:
    from rich.table import Table

    table = Table(title=f"Scaling of {curve.model or 'the model'}", title_justify="left")
    for name in ("GPUs", "layout", "tokens/s", "tok/s/GPU", "efficiency", "MFU"):
        table.add_column(name, justify="left" if name == "layout" else "right")
    budget = bool(curve.token_budget)
    priced = budget and curve.usd_per_gpu_hour is not None
    if budget:
        table.add_column("days", justify="right")
        table.add_column("GPU-hours", justify="right")
    if priced:
        table.add_column("cost $", justify="right")
    for p in curve.points:
        if not p.feasible or p.layout is None:
            table.add_row(str(p.num_gpus), f"[red]{p.error}[/]")
            continue
        lay = p.layout
        layout = " ".join(
            f"{k}{getattr(lay, k)}"
            for k in ("tp", "pp", "vpp", "cp", "ep", "dp")
            if getattr(lay, k) != 1
        )
        row = [
            str(p.num_gpus),
            f"{layout or 'dp1'} mbs{lay.micro_batch_size}",
            _fmt(p.tokens_per_s, ",.0f"),
            _fmt(p.tokens_per_s_per_gpu, ",.0f"),
            _fmt(p.scaling_efficiency, ".1%"),
            _fmt(p.mfu, ".1%"),
        ]
        if budget:
            row += [_fmt(p.days, ",.1f"), _fmt(p.gpu_hours, ",.0f")]
        if priced:
            row.append(_fmt(p.usd, ",.0f"))
        table.add_row(*row)
    out_console().print(table)  # full width when piped: no cut numbers
