"""``planner evaluate``: one layout from flags, or many from a JSON-lines file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from app.cli.common import (
    A2AOverlapOpt,
    DispatcherOpt,
    GpuMemoryOpt,
    GpuOpt,
    GpusPerNodeOpt,
    ModelOpt,
    PrecisionOpt,
    SeqLengthOpt,
    ThresholdOpt,
    err_console,
    fail,
    gib,
    inline_model_file,
    out_console,
    print_json,
    request_from_options,
)

Opt = typer.Option


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


def evaluate(
    model: ModelOpt = None,
    gpu: GpuOpt = None,
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
    moe_a2a_overlap: A2AOverlapOpt = None,
    moe_dispatcher: DispatcherOpt = None,
    memory_threshold: ThresholdOpt = None,
    input: Annotated[
        Path | None, Opt("--input", help="JSON-lines file (- for stdin): one request per line.")
    ] = None,
    json_output: Annotated[bool, Opt("--json", help="One JSON object per layout.")] = False,
) -> None:
    """Check one layout (or many): Megatron's rules, memory per GPU, speed, launch flags."""
    from app.planning.compute import evaluate_requests
    from planner.specs import SpecError

    if input is not None:
        items = _read_jsonl(input)
        good = [
            {**item, "model": inline_model_file(item.get("model"))}
            for _, item in items
            if isinstance(item, dict)
        ]
        results = iter(evaluate_requests(good, errors_inline=True))
        outputs = []
        for number, item in items:
            out = next(results) if isinstance(item, dict) else {"error": {"message": item}}
            out["line"] = number
            if "error" in out:
                out["error"]["message"] = f"line {number}: {out['error']['message']}"
            outputs.append(out)
    else:
        request = request_from_options(
            model=inline_model_file(model),
            gpu=gpu,
            num_gpus=num_gpus,
            gpus_per_node=gpus_per_node,
            gpu_memory_gib=gpu_memory_gib,
            seq_length=seq_length,
            global_batch_size=global_batch_size,
            precision=precision,
            tp=tp,
            pp=pp,
            vpp=vpp,
            cp=cp,
            ep=ep,
            etp=etp,
            micro_batch_size=micro_batch_size,
            recompute=recompute,
            sequence_parallel=sequence_parallel,
            optimizer_sharding=optimizer_sharding,
            moe_a2a_overlap=moe_a2a_overlap,
            moe_dispatcher=moe_dispatcher,
            memory_threshold=memory_threshold,
        )
        try:
            outputs = evaluate_requests([request])
        except SpecError as exc:
            fail(exc.message, field=exc.field)
    if json_output:
        for out in outputs:
            print_json(out)
    else:
        _print_table(outputs)
    if input is None and not outputs[0].get("valid", False):
        raise SystemExit(1)
    failed = sum("error" in out for out in outputs)
    if failed:  # the other lines were evaluated and printed; say how many could not be
        err_console.print(
            f"{failed} of {len(outputs)} lines could not be evaluated", highlight=False
        )
        raise SystemExit(1)


def _print_table(outputs: list[dict[str, Any]]) -> None:
    console = out_console()
    table = Table(title="Layouts", header_style="bold")
    for column in ("#", "layout", "valid", "memory GiB", "fits", "tokens/s/GPU", "MFU", "notes"):
        table.add_column(column, justify="right" if column not in ("layout", "notes") else "left")
    for n, out in enumerate(outputs, start=1):
        if "error" in out:
            table.add_row(str(n), "-", "-", "-", "-", "-", "-", out["error"]["message"])
            continue
        lay = out["layout"]
        text = (
            f"tp{lay['tp']} pp{lay['pp']} vpp{lay['vpp']} cp{lay['cp']} ep{lay['ep']} "
            f"dp{lay['dp']} mbs{lay['micro_batch_size']} {lay['recompute']}"
        )
        mem = out["memory"]
        perf = out.get("performance") or {}
        mem_text = f"{gib(mem['total_bytes'])}/{gib(mem['capacity_bytes'])}"
        tps = perf.get("tokens_per_s_per_gpu")
        mfu = perf.get("mfu")
        table.add_row(
            str(n),
            text,
            "yes" if out["valid"] else "no",
            mem_text,
            "yes" if mem["fits"] else "no",
            "-" if tps is None else f"{tps:,.0f}",
            "-" if mfu is None else f"{100 * mfu:.1f}%",
            "; ".join(out["violations"]),
        )
    console.print(table)
    if len(outputs) == 1 and outputs[0].get("megatron"):
        console.print("\n[bold]Launch:[/]")
        console.print(outputs[0]["megatron"]["command"], soft_wrap=True, highlight=False)
