"""``planner evaluate``: one layout from flags, or many from a JSON-lines file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from app.cli.common import (
    ClusterOpt,
    GpuMemoryOpt,
    GpuOpt,
    GpusPerNodeOpt,
    ModelOpt,
    PrecisionOpt,
    ProfileOpt,
    SeqLengthOpt,
    ThresholdOpt,
    err_console,
    fail,
    gib,
    inline_model_file,
    out_console,
    print_json,
)
from app.cli.options import CLUSTER_OPTIONS, MEMORY_OPTIONS, STACK_OPTIONS, shared_options
from app.cli.uncertainty_view import print_uncertainty, tokens_cell

Opt = typer.Option

if TYPE_CHECKING:
    from app.planning.reports import EvaluationFailure, LayoutReport

    Report = LayoutReport | EvaluationFailure


def register(cli: typer.Typer) -> None:
    cli.command("evaluate")(evaluate)


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any] | str]]:
    """(line number, the line's object or an error string) for each non-blank line.

    ``-`` reads standard input.
    """
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}", field="input")
    except UnicodeDecodeError as exc:
        fail(f"{path} is not UTF-8 text (byte {exc.start}); give a JSON-lines file", field="input")
    items: list[tuple[int, dict[str, Any] | str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            items.append((number, f"not valid JSON ({exc.msg} at column {exc.colno})"))
            continue
        if not isinstance(obj, dict):
            items.append((number, f"expected a JSON object, got {type(obj).__name__}"))
            continue
        items.append((number, obj))
    if not items:
        fail(f"{path} has no request lines", field="input")
    return items


@shared_options(MEMORY_OPTIONS, STACK_OPTIONS, CLUSTER_OPTIONS)
def evaluate(
    model: ModelOpt = None,
    gpu: GpuOpt = None,
    cluster: ClusterOpt = None,
    num_gpus: Annotated[int | None, Opt(help="GPUs in the job.")] = None,
    gpus_per_node: GpusPerNodeOpt = None,
    gpu_memory_gib: GpuMemoryOpt = None,
    seq_length: SeqLengthOpt = None,
    global_batch_size: Annotated[int | None, Opt(help="Sequences per iteration.")] = None,
    precision: PrecisionOpt = None,
    tp: Annotated[int | None, Opt(help="Tensor parallel size.")] = None,
    pp: Annotated[int | None, Opt(help="Pipeline parallel size.")] = None,
    vpp: Annotated[int | None, Opt(help="Virtual pipeline stages per rank.")] = None,
    cp: Annotated[int | None, Opt(help="Context parallel size.")] = None,
    ep: Annotated[int | None, Opt(help="Expert parallel size.")] = None,
    etp: Annotated[int | None, Opt(help="Expert tensor parallel size (default tp).")] = None,
    micro_batch_size: Annotated[int | None, Opt(help="Micro-batch size.")] = None,
    recompute: Annotated[str | None, Opt(help="none, selective or full.")] = None,
    sequence_parallel: Annotated[
        bool | None, Opt("--sequence-parallel/--no-sequence-parallel", help="Default: tp > 1.")
    ] = None,
    optimizer_sharding: Annotated[str | None, Opt(help="none, optimizer or full.")] = None,
    memory_threshold: ThresholdOpt = None,
    profile: ProfileOpt = None,
    input: Annotated[
        Path | None, Opt("--input", help="JSON-lines file (- for stdin): one request per line.")
    ] = None,
    json_output: Annotated[bool, Opt("--json", help="One JSON object per layout.")] = False,
    **shared: Any,
) -> None:
    """Check one layout (or many): Megatron's rules, memory per GPU, speed, launch flags."""
    from app.cli.plan import level_line
    from app.cli.requests import build_request
    from app.planning.compute import evaluate_requests
    from app.planning.reports import EvaluationFailure, LayoutReport
    from app.planning.schemas import EvaluationRequest
    from planner import SpecError

    level = None  # the calibrated level line (one request; --input lines may differ)
    if input is not None:
        reports = _evaluate_lines(_read_jsonl(input), profile)
    else:
        given = {**locals(), **shared}
        options = {k: v for k, v in given.items() if k in EvaluationRequest.model_fields}
        request, run_profile = build_request(EvaluationRequest, options, profile_file=profile)
        try:
            reports = [(None, r) for r in evaluate_requests([request], profile=run_profile)]
        except SpecError as exc:
            fail(exc.message, field=exc.field)
        level = level_line(run_profile, profile, cluster)
    if json_output:
        for line, report in reports:
            print_json(report.raw if line is None else {**report.raw, "line": line})
    else:
        _print_table([report for _, report in reports], level)
    first = reports[0][1]
    if input is None and not (isinstance(first, LayoutReport) and first.valid):
        raise SystemExit(1)
    failed = sum(isinstance(report, EvaluationFailure) for _, report in reports)
    if failed:  # the other lines were evaluated and printed; say how many could not be
        err_console.print(
            f"{failed} of {len(reports)} lines could not be evaluated", highlight=False
        )
        raise SystemExit(1)


def _evaluate_lines(
    items: list[tuple[int, dict[str, Any] | str]], profile_file: Path | None
) -> list[tuple[int | None, Report]]:
    """Each JSON line through the one evaluation request; a bad line gets its error inline,
    naming the JSON key, and the others are still evaluated (lines that share a profile, in
    one batch)."""
    from app.cli.requests import load_profile_file, with_server_cluster
    from app.planning.compute import evaluate_requests
    from app.planning.convert import parse_request
    from app.planning.reports import EvaluationFailure
    from app.planning.schemas import EvaluationRequest
    from planner import SpecError

    outputs: dict[int, Report] = {}
    groups: dict[int, tuple[Any, list[tuple[int, EvaluationRequest]]]] = {}
    for number, item in items:
        try:
            if not isinstance(item, dict):
                raise SpecError(item)
            data = {**item, "model": inline_model_file(item.get("model"))}
            profile = None
            if data.get("cluster") is not None:
                data, profile = with_server_cluster(data)
            request = parse_request(EvaluationRequest, data)
            if profile_file is not None:
                profile = load_profile_file(profile_file, request)
        except SpecError as exc:
            outputs[number] = EvaluationFailure.of(exc)
            continue
        groups.setdefault(id(profile), (profile, []))[1].append((number, request))
    for profile, members in groups.values():
        requests: list[EvaluationRequest | dict[str, Any]] = [r for _, r in members]
        results = evaluate_requests(requests, profile=profile, errors_inline=True)
        outputs.update(zip((n for n, _ in members), results, strict=True))
    for number, out in outputs.items():
        if isinstance(out, EvaluationFailure):
            out.error.message = f"line {number}: {out.error.message}"
    return [(number, outputs[number]) for number, _ in items]


def _print_table(reports: list[Report], level: str | None = None) -> None:
    from app.planning.reports import EvaluationFailure, LayoutReport

    console = out_console()
    table = Table(title="Layouts", header_style="bold")
    for column in ("#", "layout", "valid", "memory GiB", "fits", "tokens/s/GPU", "MFU", "notes"):
        table.add_column(column, justify="right" if column not in ("layout", "notes") else "left")
    for n, out in enumerate(reports, start=1):
        if isinstance(out, EvaluationFailure):
            table.add_row(str(n), "-", "-", "-", "-", "-", "-", out.error.message)
            continue
        lay, mem, perf = out.layout, out.memory, out.performance
        text = (
            f"tp{lay.tp} pp{lay.pp} vpp{lay.vpp} cp{lay.cp} ep{lay.ep} "
            f"dp{lay.dp} mbs{lay.micro_batch_size} {lay.recompute}"
        )
        tps = perf.tokens_per_s_per_gpu if perf else None
        mfu = perf.mfu if perf else None
        table.add_row(
            str(n),
            text,
            "yes" if out.valid else "no",
            f"{gib(mem.total_bytes)}/{gib(mem.capacity_bytes)}",
            "yes" if mem.fits else "no",
            "-" if tps is None or perf is None else tokens_cell(perf.model_dump()),
            "-" if mfu is None else f"{100 * mfu:.1f}%",
            "; ".join(out.violations),
        )
    console.print(table)
    if level:
        console.print(level, highlight=False)
    first = reports[0] if len(reports) == 1 else None
    if isinstance(first, LayoutReport) and first.performance is not None:
        print_uncertainty(console, first.performance.model_dump())
    if isinstance(first, LayoutReport) and first.megatron is not None:
        console.print("\n[bold]Launch:[/]")
        console.print(first.megatron.command, soft_wrap=True, highlight=False)
