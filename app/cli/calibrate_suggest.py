"""``planner calibrate --suggest K --request FILE``: the K short runs on your cluster that would
most reduce the uncertainty of one plan's prediction, each with its launch command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from app.cli.common import fail, out_console, print_json


def read_request(path: Path | None) -> dict[str, Any]:
    """The plan to measure around: {"evaluation": {...}} or {"plan": {...}}; a bare object is
    an evaluation request (the body of POST /v1/evaluations), beside ``k`` and ``max_nodes``."""
    if path is None:
        fail(
            "--suggest needs --request FILE.json: the layout (or plan request) to measure around",
            field="--request",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}", field="--request")
    except ValueError as exc:
        fail(f"{path} is not JSON: {exc}", field="--request")
    if not isinstance(data, dict):
        fail(f"{path} must hold one JSON object", field="--request")
    from app.planning.suggest import wrap_bare_layout

    return dict(wrap_bare_layout(data))


def run_suggest(
    k: int,
    request_file: Path | None,
    rows: list[dict[str, str]],
    json_output: bool,
    *,
    max_nodes: int | None = None,
) -> None:
    from app.planning.suggest import suggest
    from planner.specs import SpecError

    body = {**read_request(request_file), "k": k}
    if max_nodes is not None:  # else the request file's own max_nodes, if it gives one
        body["max_nodes"] = max_nodes
    try:
        result = suggest(body, measured_rows=rows)
    except SpecError as exc:  # a field of the request file is named inside it, not as a flag
        field = exc.field or "request"
        flags = {"k": "--suggest", "max_nodes": "--max-nodes" if max_nodes is not None else None}
        fail(exc.message, field=flags.get(field) or f"--request ({field})")
    if json_output:
        print_json(result)
        return
    print_suggestions(result)


def print_suggestions(result: dict[str, Any]) -> None:
    console = out_console()
    plan = result["plan"]
    console.print(
        f"Plan: {plan['model']} on {plan['num_gpus']} x {plan['gpu']}; its prediction's "
        f"uncertainty: {uncertainty_words(result['uncertainty_before'])} now, "
        f"{uncertainty_words(result['uncertainty_after'])} once these runs are measured "
        f"({result['candidates_considered']} candidates considered).",
        highlight=False,
    )
    table = Table(title="Runs to measure next (best first)", header_style="bold")
    for column in ("#", "change", "GPUs", "step s", "minutes", "variance removed", "informs"):
        table.add_column(column, justify="left" if column in ("change", "informs") else "right")
    for n, run in enumerate(result["runs"], start=1):
        table.add_row(
            str(n),
            run["change"],
            str(run["num_gpus"]),
            f"{run['step_time_s']:.2f}",
            f"{run['minutes']:.0f}",
            f"{100 * run['variance_reduction']:.0f}%",
            ", ".join(run["informs"]),
        )
    if result.get("note"):
        console.print(f"Note: {result['note']}.", highlight=False)
    if result["runs"]:
        console.print(table)
    for n, run in enumerate(result["runs"], start=1):
        console.print(f"\n[bold]{n}.[/] {run['command']}", soft_wrap=True, highlight=False)
    console.print(
        "\nUpload each run's Megatron-LM log (`planner calibrate --log FILE --gpu-type ...`, or "
        "POST /v1/clusters/{slug}/measurements) to calibrate.",
        highlight=False,
    )


def uncertainty_words(u: dict[str, Any]) -> str:
    """'±14.9% (coefficients ±12.6%, the cluster's level ±11.4% from 0 of its runs)'."""
    return (
        f"±{u['total_pct']:.1f}% (coefficients ±{u['coefficients_pct']:.1f}%, the cluster's "
        f"level ±{u['cluster_level_pct']:.1f}% from {u['cluster_level_rows']} of its runs)"
    )
