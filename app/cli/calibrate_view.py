"""What ``planner calibrate`` shows: a Rich progress bar while it fits, then a short summary per
GPU (rows, cross-validated error with its spread, the coefficients that moved) and the skipped
rows only on request (``--show-skipped``, each with its reason)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.table import Table

from app.cli.common import err_console, out_console

Progress = Callable[[str, int, int], None]


@contextmanager
def calibration_progress() -> Iterator[Progress]:
    """A progress callback drawing one bar per step on stderr (nothing when piped)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    with Bar(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=not sys.stderr.isatty(),
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done, total=total)

        yield update


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def level_words(level: dict[str, Any]) -> str:
    """The cluster's level in one line (planner.calibration.level)."""
    rows = f"{level['n_rows']} row" + ("" if level["n_rows"] == 1 else "s")
    return (
        f"cluster level: step time x{level['cluster_step_scale']:.3f} (throughput "
        f"x{level['throughput_factor']:.3f}; posterior sd {100 * level['log_sd']:.1f} % against "
        f"{100 * level['prior_log_sd']:.1f} % between clusters; {rows}, "
        f"{level['shrinkage']:.2f} of their mean error)"
    )


def print_report(report: dict[str, Any], output: Path | None, *, show_skipped: bool) -> None:
    from app.calibration.honest import kept_cv

    console = out_console()
    table = Table(
        title="Calibration: cross-validated error of tokens/s per GPU (held-out rows)",
        header_style="bold",
    )
    for column in ("GPU", "rows", "folds", "median before", "median after", "p90 after"):
        table.add_column(column, justify="left" if column == "GPU" else "right")
    table.add_column("fold medians (min-max)", justify="right")
    for gpu, item in report["gpus"].items():
        cv = item["cross_validation"]
        spread = cv.get("fold_median_ape_range")
        held = kept_cv(item) or {}  # the held-out error of what the calibration kept
        table.add_row(
            gpu,
            str(item["rows"]),
            str(cv.get("method") or cv.get("note", "-")),
            _pct(cv.get("median_ape_before")),
            _pct(held.get("median_ape")),
            _pct(held.get("p90_ape")),
            f"{_pct(spread[0])}-{_pct(spread[1])}" if spread else "-",
        )
    console.print(table)
    for gpu, item in report["gpus"].items():
        coefficients = item.get("coefficients", [])
        moved = [c for c in coefficients if c["moved"]]
        kept = [c["name"] for c in coefficients if not c["identified"]]
        changes = ", ".join(
            f"{c['name']} {c['prior']:.4g} -> {c['fitted']:.4g}"
            + (f" ({c['change_pct']:+.1f}%)" if c["change_pct"] is not None else "")
            for c in moved
        )
        console.print(f"[bold]{gpu}[/]: moved {changes or 'nothing'}", highlight=False)
        if (level := item.get("level")) and level.get("applied", True):
            console.print(f"  {level_words(level)}", highlight=False)
        if campaigns := item.get("fit", {}).get("noise", {}).get("campaigns"):
            counted = ", ".join(
                f"{v['rows']} as {v['effective_rows']:.1f}" for v in campaigns.values()
            )
            console.print(
                f"  rows of one campaign share errors; counted as independent rows: {counted}",
                highlight=False,
            )
        if decision := item.get("decision"):
            console.print(f"  {decision['reason']}", highlight=False)
        if kept:
            console.print(
                f"  kept at the prior (the rows do not identify them): {', '.join(kept)}",
                highlight=False,
            )
    skipped = report.get("skipped", [])
    if skipped and show_skipped:
        console.print(f"[yellow]{len(skipped)} rows skipped:[/]")
        for message in skipped:
            console.print(f"  {message}", highlight=False)
    elif skipped:
        console.print(
            f"{len(skipped)} rows skipped (incomplete architecture or layout); "
            "--show-skipped lists each with its reason",
            highlight=False,
        )
    if output is not None:
        console.print(f"profiles written to {output}")
