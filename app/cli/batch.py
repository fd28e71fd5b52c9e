"""``planner batch JOBS -o OUT``: plan many jobs on all cores, one output row per job and rank.

With ``--server URL`` the batch goes to a planner service instead (``POST /v1/batches``), whose
workers (``planner worker`` processes on any number of machines) run it; the output has the same
columns either way.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.batches.rows import (
    LAYOUT_COLUMNS,
    OUTPUT_COLUMNS,
    outcome_counts,
    outcome_line,
    rows_for,
)
from app.cli.common import ClusterOpt, ProfileOpt, err_console, fail
from app.cli.errors import EXIT_INTERRUPTED

if TYPE_CHECKING:
    from app.planning.reports import PlanAnswer

__all__ = ["LAYOUT_COLUMNS", "OUTPUT_COLUMNS", "batch", "read_jobs", "register", "rows_for"]

Opt = typer.Option
INTERRUPTED = "interrupted (Ctrl-C) before this job was planned; run it again"


def register(cli: typer.Typer) -> None:
    from app.cli.batches import batches

    cli.command("batch")(batch)
    cli.command("batches")(batches)  # the batches a service holds


def read_jobs(path: Path) -> list[dict[str, Any]]:
    """Jobs from CSV (one per row), or YAML/JSON (a list of objects, or {"jobs": [...]})."""
    from app.batches.jobs_file import JobsFileError, file_format, parse_jobs

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}", field="JOBS")
    except UnicodeDecodeError as exc:
        fail(f"{path} is not UTF-8 text (byte {exc.start}); give a .csv, .yaml or .json jobs file",
             field="JOBS")  # fmt: skip
    try:
        return parse_jobs(text, file_format(path.name) or "", source=str(path)).jobs
    except JobsFileError as exc:
        fail(exc.message, field="JOBS")


def _plan_one(
    index: int, job: dict[str, Any], profile_file: Path | None = None
) -> tuple[int, PlanAnswer | str]:
    """One batch row through the one plan request; errors (a message) name its column or key."""
    from app.batches.schemas import BatchJobCreate
    from app.cli.common import inline_model_file
    from app.cli.requests import load_profile_file, with_server_cluster
    from app.planning.compute import plan_request
    from app.planning.convert import column_label, error_text, expand_text_lists, parse_request
    from planner import SpecError

    try:
        data = expand_text_lists({**job, "model": inline_model_file(job.get("model"))})
        profile = None
        if data.get("cluster") is not None:  # a user cluster and its newest calibration
            data, profile = with_server_cluster(data)
        request = parse_request(BatchJobCreate, data, label=column_label(job))
        if profile_file:
            profile = load_profile_file(profile_file, request)
        return index, plan_request(request, profile=profile)
    except SpecError as exc:
        return index, error_text(exc)
    except SystemExit:  # a model file that cannot be read: inline_model_file said why
        return index, f"cannot read the model file {job.get('model')!r} (field model)"
    except Exception as exc:  # one bad job must never sink the batch
        return index, f"{type(exc).__name__}: {exc}"


def batch(
    jobs: Annotated[Path, typer.Argument(help="Jobs: .csv, .yaml or .json.")],
    output: Annotated[Path, Opt("-o", "--output", help="Results: .csv or .json.")],
    workers: Annotated[int, Opt(help="Processes (default: all cores).", show_default=False)] = 0,
    server: Annotated[
        str | None, Opt(help="Send the batch to this planner service instead (base URL).")
    ] = None,
    api_key: Annotated[str | None, Opt(help="API key, sent as the X-API-Key header.")] = None,
    timeout: Annotated[float, Opt(help="Seconds to wait for the server's batch.")] = 86400.0,
    profile: ProfileOpt = None,
    cluster: ClusterOpt = None,
) -> None:
    """Plan every job in a file on all cores; a bad job gets an error row, the rest still run.

    --cluster is the cluster of every row that names neither a cluster nor a gpu column."""
    if output.suffix.lower() not in (".csv", ".json"):
        fail(f"{output}: the output must end in .csv or .json", field="output")
    # checked before any job runs: a batch can take hours, and its rows live only in memory
    if output.is_dir():
        fail(f"cannot write {output}: it is a folder", field="output")
    if not output.expanduser().resolve().parent.is_dir():
        fail(f"cannot write {output}: its folder does not exist", field="output")
    items = read_jobs(jobs)
    if not items:
        fail(f"{jobs}: no jobs", field="JOBS")
    if cluster is not None:
        items = [
            job if job.get("cluster") or job.get("gpu") else {**job, "cluster": cluster}
            for job in items
        ]
    if server is not None:
        if profile is not None:
            fail("--profile is for local batches; the server uses its clusters' calibrations")
        _remote(items, output, server, api_key, timeout)
        return
    _local(items, output, workers, profile)


def _write(rows: list[dict[str, Any]], output: Path) -> None:
    if output.suffix.lower() == ".json":
        output.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    else:
        with output.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=OUTPUT_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)


def _remote(
    items: list[dict[str, Any]], output: Path, server: str, api_key: str | None, timeout: float
) -> None:
    """Submit the jobs as one batch, follow its progress, and write its results."""
    from rich.progress import Progress

    from app.batches.refusal import refused_jobs
    from app.cli.common import inline_model_file
    from app.planning.convert import expand_text_lists
    from app.sdk import PlannerAPIError, PlannerClient
    from planner import SpecError

    for i, item in enumerate(items):  # the server never reads paths: send model files inline
        item["model"] = inline_model_file(item.get("model"))
        # the text forms of lists ('1,2,4', '64-1024') as the API's lists; a job whose lists
        # do not parse is sent as written, and the server refuses the batch, saying why
        with contextlib.suppress(SpecError):
            items[i] = expand_text_lists(item)
    with (  # a refused connection, a bad key or a problem answer: app/cli/errors.py
        PlannerClient(server, api_key=api_key) as client,
        Progress(disable=not sys.stderr.isatty(), console=err_console) as bar,
    ):
        try:
            submitted = client.submit_batch(items)
        except PlannerAPIError as exc:  # a bad job: the server queued none of them
            if exc.status != 422:
                raise
            fail(refused_jobs(exc.errors, items), field="JOBS")
        task = bar.add_task(f"batch {submitted['id'][:8]}", total=submitted["total"])
        try:
            done = client.wait_for_batch(
                submitted["id"],
                timeout=timeout,
                on_progress=lambda b: bar.update(task, completed=b["finished"]),
            )
        except KeyboardInterrupt:  # the server keeps running it: say where its rows will be
            where = f"{server.rstrip('/')}/v1/batches/{submitted['id']}"
            err_console.print(
                f"interrupted; batch {submitted['id']} goes on at the server: its rows at "
                f"{where}/results?format=csv (or the web page /batches)",
                highlight=False,
            )
            raise SystemExit(EXIT_INTERRUPTED) from None
        rows: list[dict[str, Any]] = client.get_batch_results(done["id"], format="json")
    for job in done["jobs"]:
        if job["status"] != "succeeded":
            err_console.print(
                f"[red]{job['name']}:[/] {job['error'] or job['status']}", highlight=False
            )
    _write(rows, output)
    counts = outcome_counts(rows)
    err_console.print(f"{outcome_line(counts)} by {server}; wrote {output}", highlight=False)
    if counts["failed"] == done["total"]:
        raise SystemExit(1)


def _local(
    items: list[dict[str, Any]], output: Path, workers: int, profile: Path | None = None
) -> None:
    from rich.progress import Progress

    names = [str(job.get("name") or f"job-{i + 1}") for i, job in enumerate(items)]
    results: list[PlanAnswer | str] = [""] * len(items)
    processes = workers or os.cpu_count() or 1
    interrupted = False
    with Progress(disable=not sys.stderr.isatty(), console=err_console) as bar:
        task = bar.add_task("planning", total=len(items))
        pool = ProcessPoolExecutor(max_workers=min(processes, len(items)))
        try:
            futures = [pool.submit(_plan_one, i, job, profile) for i, job in enumerate(items)]
            for future in as_completed(futures):
                index, result = future.result()
                results[index] = result
                if isinstance(result, str):
                    err_console.print(f"[red]{names[index]}:[/] {result}", highlight=False)
                bar.advance(task)
        except KeyboardInterrupt:  # Ctrl-C: keep the jobs already planned (a batch takes hours)
            interrupted = True
            results = [r if not (isinstance(r, str) and not r) else INTERRUPTED for r in results]
        finally:
            pool.shutdown(wait=not interrupted, cancel_futures=True)
    rows = [
        row
        for name, result, job in zip(names, results, items, strict=True)
        for row in rows_for(name, result, job)
    ]
    _write(rows, output)
    counts = outcome_counts(rows)
    err_console.print(f"{outcome_line(counts)}; wrote {output}", highlight=False)
    if interrupted:
        done = sum(not (isinstance(r, str) and r == INTERRUPTED) for r in results)
        err_console.print(
            f"interrupted: {done} of {len(items)} jobs finished; the others have the error "
            f"{INTERRUPTED!r} in {output}",
            highlight=False,
        )
        raise SystemExit(EXIT_INTERRUPTED)
    if counts["failed"] == len(items):
        raise SystemExit(1)
