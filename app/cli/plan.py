"""``planner plan``: search every layout and rank the feasible ones."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from app.cli.common import (
    EXIT_NOTHING_FEASIBLE,
    ClusterOpt,
    GpuMemoryOpt,
    GpuOpt,
    GpusPerNodeOpt,
    ModelOpt,
    PrecisionOpt,
    ProfileOpt,
    SeqLengthOpt,
    ThresholdOpt,
    fail,
    gib,
    out_console,
    print_json,
)
from app.cli.memory_options import (
    AutoLayoutOpt,
    MaximizeOpt,
    MinimizeOpt,
    NumericsOpt,
    SearchModulesOpt,
    SearchOffloadOpt,
)
from app.cli.options import CLUSTER_OPTIONS, MEMORY_OPTIONS, STACK_OPTIONS, shared_options
from app.cli.ranges import print_expansions
from app.cli.uncertainty_view import print_uncertainty, tokens_cell

Opt = typer.Option
AxisOpt = Annotated[str | None, Opt(help="Fix this axis (8) or allow a list (1,2,4).")]
MaxOpt = Annotated[int | None, Opt(help="Upper limit for this axis.")]

if TYPE_CHECKING:
    from app.planning.reports import PlanAnswer


def register(cli: typer.Typer) -> None:
    cli.command("plan")(plan)


@shared_options(MEMORY_OPTIONS, STACK_OPTIONS, CLUSTER_OPTIONS)
def plan(
    model: ModelOpt = None,
    gpu: GpuOpt = None,
    cluster: ClusterOpt = None,
    num_gpus: Annotated[str | None, Opt(help="GPUs: 64, a list 64,128 or a range 64-1024.")] = None,
    gpus_per_node: GpusPerNodeOpt = None,
    gpu_memory_gib: GpuMemoryOpt = None,
    seq_length: SeqLengthOpt = None,
    global_batch_size: Annotated[
        str | None, Opt(help="Sequences per iteration: 1024, a list or a range.")
    ] = None,
    precision: PrecisionOpt = None,
    tp: AxisOpt = None,
    pp: AxisOpt = None,
    vpp: AxisOpt = None,
    cp: AxisOpt = None,
    ep: AxisOpt = None,
    etp: AxisOpt = None,
    micro_batch_size: AxisOpt = None,
    max_tp: MaxOpt = None,
    max_pp: MaxOpt = None,
    max_vpp: MaxOpt = None,
    max_cp: MaxOpt = None,
    max_ep: MaxOpt = None,
    max_micro_batch_size: MaxOpt = None,
    recompute: Annotated[str | None, Opt(help="Allowed: none,selective,full.")] = None,
    sequence_parallel: Annotated[
        bool | None,
        Opt("--sequence-parallel/--no-sequence-parallel", help="On or off (default: tp > 1)."),
    ] = None,
    optimizer_sharding: Annotated[
        str | None, Opt(help="Allowed: none,optimizer,full (default none,optimizer; full = FSDP2).")
    ] = None,
    allow_numerics_changes: NumericsOpt = False,
    search_recompute_modules: SearchModulesOpt = False,
    search_activation_offload: SearchOffloadOpt = False,
    auto_pipeline_layout: AutoLayoutOpt = False,
    maximize: MaximizeOpt = None,
    minimize: MinimizeOpt = None,
    objective: Annotated[
        str | None, Opt(help="Rank by throughput (tokens/s), time_to_train or cost.")
    ] = None,
    token_budget: Annotated[
        float | None, Opt(help="Tokens to train, e.g. 15e12 (time_to_train, cost).")
    ] = None,
    usd_per_gpu_hour: Annotated[
        float | None, Opt(help="Price of one GPU-hour in USD (cost).")
    ] = None,
    memory_threshold: ThresholdOpt = None,
    top_k: Annotated[int | None, Opt(help="Plans to return (10).")] = None,
    seed: Annotated[int | None, Opt(help="Seed of the sampled search (0).")] = None,
    max_trials: Annotated[
        int | None, Opt(help="Trials of the sampled search, large spaces (500).")
    ] = None,
    exhaustive: Annotated[bool, Opt(help="Evaluate every feasible layout.")] = False,
    pareto: Annotated[bool, Opt(help="Also return the throughput/headroom Pareto front.")] = False,
    profile: ProfileOpt = None,
    json_output: Annotated[bool, Opt("--json", help="Print the result as JSON.")] = False,
    **shared: Any,
) -> None:
    """Rank the feasible layouts by predicted speed and print the best with launch flags."""
    from app.cli.requests import build_request
    from app.planning.compute import plan_request
    from app.planning.schemas import PlanJobCreate
    from planner import SpecError

    if not json_output:
        print_expansions(num_gpus=num_gpus, global_batch_size=global_batch_size)
    options = {k: v for k, v in {**locals(), **shared}.items() if k in PlanJobCreate.model_fields}
    request, run_profile = build_request(PlanJobCreate, options, profile_file=profile)
    show_progress = not json_output and sys.stderr.isatty()
    try:
        if show_progress:
            result = _plan_with_progress(plan_request, request, run_profile)
        else:
            result = plan_request(request, profile=run_profile)
    except SpecError as exc:
        fail(exc.message, field=exc.field)
    if json_output:
        print_json(result.raw)
    else:
        _print_result(result, level_line(run_profile, profile, cluster))
    if not result.plans:
        if not json_output:
            Console(stderr=True).print("[bold red]No feasible layout.[/]")
        raise SystemExit(EXIT_NOTHING_FEASIBLE)


def _plan_with_progress(plan_request: Any, request: Any, profile: Any) -> PlanAnswer:
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("searching layouts", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        out: PlanAnswer = plan_request(request, profile=profile, progress=progress)
        return out


def level_line(run_profile: Any, profile_file: Any, cluster: str | None) -> str | None:
    """The sentence saying that the profile carries a cluster's calibrated level (its
    ``cluster_step_scale``, planner.calibration.level), which scales every predicted step time;
    None for a profile without one (the shipped profiles)."""
    scale = getattr(run_profile, "cluster_step_scale", 1.0)
    if run_profile is None or scale == 1.0:
        return None
    source = f"the profile {profile_file}" if profile_file else f"cluster {cluster}'s calibration"
    return (
        f"Cluster level applied ({source}): every step time x{scale:.3f}, "
        f"tokens/s x{1 / scale:.3f}."
    )


def _print_result(result: PlanAnswer, level: str | None = None) -> None:
    from app.planning.reports import InverseResult

    console = out_console()
    if isinstance(result, InverseResult):  # an inverse question: the value reached first
        console.print(f"[bold]{result.question}[/] reached: {result.value}", highlight=False)
        caption = f"{result.search.probes} values of {result.search.inverse} tried"
    else:
        caption = (
            f"{(result.funnel or {}).get('sentence', '')}; "
            f"{'proven optimal' if result.search.proven_optimal else 'sampled search'}, "
            f"{result.search.elapsed_s or 0:.2f} s"
        )
    if not result.plans:  # no empty table: the reasons and what would fit
        _print_funnel(console, result)
        _print_rejections(console, result)
        return
    table = Table(
        title=f"Best layouts for {result.model} on {result.gpu}",
        caption=caption,
        header_style="bold",
    )
    kind = result.plans[0].objective.kind
    # EP and expert TP mean nothing for a dense model (the web table hides them too)
    moe = "--num-experts" in result.plans[0].megatron.command
    axes = ("tp", "pp", "vpp", "cp", "ep", "etp", "dp") if moe else ("tp", "pp", "vpp", "cp", "dp")
    columns = [
        "#",
        "GPUs",
        *axes,
        "mbs",
        "recompute",
        "sharding",
        "tokens/s/GPU",
        "MFU",
        "step s",
        "mem GiB",
    ]
    if kind != "throughput":
        columns += ["days", "USD"] if kind == "cost" else ["days"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("recompute", "sharding") else "right")
    for rank, plan in enumerate(result.plans, start=1):
        lay, perf, mem = plan.layout, plan.performance, plan.memory
        cells = [
            str(rank),
            str(lay.tp * lay.pp * lay.cp * lay.dp),
            *(str(getattr(lay, k)) for k in axes),
            str(lay.micro_batch_size),
            lay.recompute,
            lay.optimizer_sharding,
            tokens_cell(perf.model_dump()),
            f"{100 * (perf.mfu or 0):.1f}%",
            f"{perf.step_time_s or 0:.2f}",
            f"{gib(mem.total_bytes)}/{gib(mem.capacity_bytes)}",
        ]
        if kind != "throughput":
            cells.append(f"{plan.objective.days or 0:,.1f}")
            if kind == "cost":
                cells.append(f"{plan.objective.usd or 0:,.0f}")
        table.add_row(*cells)
    console.print(table)
    if level:
        console.print(level, highlight=False)
    if not isinstance(result, InverseResult) and result.winner:
        console.print(f"Why #1: {result.winner['sentence']}.", highlight=False)
    _print_choices(console, result)
    best = result.plans[0]
    print_uncertainty(console, best.performance.model_dump())
    console.print("\n[bold]Launch the best plan:[/]")
    console.print(best.megatron.command, soft_wrap=True, highlight=False)
    for note in best.megatron.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    _print_rejections(console, result)


def _print_funnel(console: Any, result: PlanAnswer) -> None:
    funnel = getattr(result, "funnel", None)  # an inverse answer has none
    if funnel:
        console.print(f"Search: {funnel['sentence']}.", highlight=False)
        _print_choices(console, result)


def _print_choices(console: Any, result: PlanAnswer) -> None:
    """The stack settings the request left open and the search chose (stack_choice)."""
    if chosen := (getattr(result, "funnel", None) or {}).get("choices_sentence"):
        console.print(f"The planner chose: {chosen}.", highlight=False)


def _print_rejections(console: Any, result: PlanAnswer) -> None:
    from app.cli.infeasible import print_infeasible

    infeasible = getattr(result, "infeasible", None)  # an inverse answer has none
    if infeasible:
        print_infeasible(console, infeasible)
        return
    if result.rejections:
        console.print("\n[bold]Rejected layouts:[/]")
        for reason, count in sorted(result.rejections.items(), key=lambda kv: -kv[1]):
            console.print(f"  {count:>8,}  {reason}", highlight=False)
