"""``planner batch JOBS -o OUT``: plan many jobs on all cores, one output row per job and rank."""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.common import err_console, fail

Opt = typer.Option
GB = 1e9
LAYOUT_COLUMNS = (
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "dp",
    "micro_batch_size",
    "recompute",
    "optimizer_sharding",
)
OUTPUT_COLUMNS = (
    "name",
    "rank",
    *LAYOUT_COLUMNS,
    "tokens_per_s_per_gpu",
    "mfu",
    "step_time_s",
    "memory_total_gb",
    "memory_weights_optimizer_gb",
    "memory_activations_gb",
    "bubble_share",
    "megatron_command",
    "error",
)
INT_COLUMNS = {
    "num_gpus",
    "gpus_per_node",
    "seq_length",
    "global_batch_size",
    "top_k",
    "seed",
    "max_trials",
    "max_tp",
    "max_pp",
    "max_vpp",
    "max_cp",
    "max_ep",
    "max_micro_batch_size",
}


def register(cli: typer.Typer) -> None:
    cli.command("batch")(batch)


def read_jobs(path: Path) -> list[dict[str, Any]]:
    """Jobs from CSV (one per row), or YAML/JSON (a list of objects, or {"jobs": [...]})."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}", field="jobs")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        jobs: list[dict[str, Any]] = []
        for row in csv.DictReader(text.splitlines()):
            job = {k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()}
            for key in INT_COLUMNS & job.keys():
                if job[key].isdigit():
                    job[key] = int(job[key])
            jobs.append(job)
        return jobs
    if suffix not in (".yaml", ".yml", ".json"):
        fail(f"{path}: use a .csv, .yaml, .yml or .json file", field="jobs")
    import yaml

    try:
        data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        fail(f"{path}: cannot parse: {exc}", field="jobs")
    if isinstance(data, dict) and "jobs" in data:
        data = data["jobs"]
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        fail(f"{path}: expected a list of job objects", field="jobs")
    return list(data)


def _plan_one(index: int, job: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    import models_db
    from app.planning import plan_request
    from planner.specs import SpecError

    request = {k: v for k, v in job.items() if k != "name"}
    model = request.get("model")
    if isinstance(model, str) and model.endswith((".json", ".yaml", ".yml")):
        try:  # a local spec or config.json file, read here (planning takes slugs and objects)
            request["model"] = models_db.resolve_model(Path(model)).to_dict()
        except SpecError as exc:
            return index, {"error": f"{model}: {exc.message} (field model)"}
    try:
        return index, plan_request(request)
    except SpecError as exc:
        where = f" (field {exc.field})" if exc.field else ""
        return index, {"error": f"{exc.message}{where}"}
    except Exception as exc:  # one bad job must never sink the batch
        return index, {"error": f"{type(exc).__name__}: {exc}"}


def rows_for(name: str, result: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "error" in result:
        yield {"name": name, "rank": "", "error": result["error"]}
        return
    if not result["plans"]:
        reasons = "; ".join(f"{n} x {r}" for r, n in result.get("rejections", {}).items())
        yield {"name": name, "rank": "", "error": f"no feasible layout: {reasons}"}
        return
    for rank, plan in enumerate(result["plans"], start=1):
        lay, perf, mem = plan["layout"], plan["performance"], plan["memory"]
        terms = mem["breakdown"]
        states = sum(
            terms.get(k) or 0.0 for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes")
        )
        yield {
            "name": name,
            "rank": rank,
            **{k: lay[k] for k in LAYOUT_COLUMNS},
            "tokens_per_s_per_gpu": round(perf["tokens_per_s_per_gpu"], 1),
            "mfu": round(perf["mfu"], 4),
            "step_time_s": round(perf["step_time_s"], 4),
            "memory_total_gb": round(mem["total_bytes"] / GB, 2),
            "memory_weights_optimizer_gb": round(states / GB, 2),
            "memory_activations_gb": round((terms.get("activations_bytes") or 0.0) / GB, 2),
            "bubble_share": round(perf.get("shares", {}).get("bubble_share") or 0.0, 4),
            "megatron_command": plan["megatron"]["command"],
            "error": "",
        }


def batch(
    jobs: Annotated[Path, typer.Argument(help="Jobs: .csv, .yaml or .json.")],
    output: Annotated[Path, Opt("-o", "--output", help="Results: .csv or .json.")],
    workers: Annotated[int, Opt(help="Processes (default: all cores).")] = 0,
) -> None:
    """Plan every job in a file on all cores; a bad job gets an error row, the rest still run."""
    from rich.progress import Progress

    if output.suffix.lower() not in (".csv", ".json"):
        fail(f"{output}: the output must end in .csv or .json", field="output")
    items = read_jobs(jobs)
    if not items:
        fail(f"{jobs}: no jobs", field="jobs")
    names = [str(job.get("name") or f"job-{i + 1}") for i, job in enumerate(items)]
    results: list[dict[str, Any]] = [{}] * len(items)
    processes = workers or os.cpu_count() or 1
    with Progress(disable=not sys.stderr.isatty(), console=err_console) as bar:
        task = bar.add_task("planning", total=len(items))
        with ProcessPoolExecutor(max_workers=min(processes, len(items))) as pool:
            futures = [pool.submit(_plan_one, i, job) for i, job in enumerate(items)]
            for future in as_completed(futures):
                index, result = future.result()
                results[index] = result
                if "error" in result:
                    err_console.print(f"[red]{names[index]}:[/] {result['error']}", highlight=False)
                bar.advance(task)
    rows = [
        row for name, result in zip(names, results, strict=True) for row in rows_for(name, result)
    ]
    if output.suffix.lower() == ".json":
        output.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    else:
        with output.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=OUTPUT_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    failed = sum("error" in r for r in results)
    err_console.print(f"{len(items) - failed} of {len(items)} jobs planned; wrote {output}")
    if failed == len(items):
        raise SystemExit(1)
