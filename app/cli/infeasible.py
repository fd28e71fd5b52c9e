"""``planner plan`` when nothing fits: what would (the result's ``infeasible`` block).

The fewest GPUs and each smaller change come with the flags that plan them, the nearest
layouts with how far over the memory limit each is, and each rejection reason with its fix.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from app.cli.common import gib
from app.planning.convert import flag_label

GRID = (("tp", "TP"), ("pp", "PP"), ("vpp", "VPP"), ("cp", "CP"), ("ep", "EP"), ("dp", "DP"))


def _flags(request: dict[str, Any]) -> str:
    """A change's request fields as the flags that plan it: --recompute full."""
    parts = []
    for name, value in request.items():
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"{flag_label(name)} {text}")
    return " ".join(parts)


def _layout(layout: dict[str, Any], moe: bool) -> str:
    parts = [
        f"{word}{layout[key]}"
        for key, word in GRID
        if layout.get(key) is not None
        and (key in ("tp", "pp", "dp") or layout[key] > 1)
        and (moe or key != "ep")
    ]
    return " ".join([*parts, f"mbs{layout.get('micro_batch_size', 1)}"])


def print_infeasible(console: Any, infeasible: dict[str, Any]) -> None:
    """Print what would make the job fit, then the rejection reasons with their fixes."""
    fewest = infeasible.get("fewest_gpus")
    if fewest is not None:
        console.print(f"\n[bold]Fewest GPUs that fit:[/] {fewest}", highlight=False)
    else:
        tried = infeasible.get("max_gpus_tried")
        console.print(f"\n[bold]No GPU count up to {tried} fits.[/]", highlight=False)
    if infeasible.get("changes"):
        console.print("[bold]Changes that fit (each checked):[/]")
        for change in infeasible["changes"]:
            console.print(
                f"  {change['description']}: {_flags(change['request'])}", highlight=False
            )
    moe = bool(infeasible.get("moe"))
    if infeasible.get("nearest"):
        table = Table(title="Nearest layouts", header_style="bold")
        for column in ("layout", "recompute", "memory GiB", "limit GiB", "over GiB", "over"):
            table.add_column(
                column, justify="left" if column in ("layout", "recompute") else "right"
            )
        for near in infeasible["nearest"]:
            table.add_row(
                _layout(near["layout"], moe),
                str(near["layout"].get("recompute")),
                gib(near["total_bytes"]),
                gib(near["limit_bytes"]),
                gib(near["over_bytes"]),
                f"{100 * near['over_fraction']:.0f} %",
            )
        console.print(table)
    if infeasible.get("fixes"):
        console.print("[bold]Rejected layouts, and the fix:[/]")
        for fix in infeasible["fixes"]:
            console.print(f"  {fix['count']:>8,}  {fix['reason']}: {fix['fix']}", highlight=False)
