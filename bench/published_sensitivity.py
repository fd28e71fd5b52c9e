"""How far the unstated axes of a published run move the published check's ratio.

The check (:mod:`bench.published_check`) lets the search choose every axis a source leaves
open, so its ratio is the model's most optimistic reading of the run. For the Megatron-LM
README rows (issue 12: over-predicted by 1.1-1.2x while the dgxc rows of similar models are
within a few per cent) the open axes are the micro-batch size, the interleaving (vpp) and the
recompute mode; this module re-plans each such case with the micro-batch pinned to 1, 2 and 4
and reports the best ratio for each, beside the check's best and its no-interleaving bracket.
Nothing is fitted: it only shows which published figures the unstated axes alone can reach.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from models_db.profiles import load_profile
from planner.search.planning import plan

if TYPE_CHECKING:
    from bench.published_cases import Case

MICRO_BATCHES = (1, 2, 4)


def ratio_by_micro_batch(case: Case) -> dict[int, float | None]:
    """Best predicted / published with the micro-batch pinned, for each of MICRO_BATCHES."""
    profile = load_profile(case.cluster.gpu)
    out: dict[int, float | None] = {}
    for mbs in MICRO_BATCHES:
        result = plan(
            case.model,
            case.cluster,
            case.job,
            constraints=replace(case.constraints, micro_batch_size=mbs),
            profile=profile,
            top_k=1,
            threshold=1.0,
        )
        best = result.plans[0] if result.plans else None
        out[mbs] = None if best is None else float(best.performance[case.metric]) / case.published
    return out


def sensitivity_rows(cases: Iterable[Case], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per case whose source leaves the micro-batch open (the README series)."""
    by_case = {r["case"]: r for r in results}
    rows = []
    for case in cases:
        if case.constraints.micro_batch_size is not None or not case.sweep:
            continue
        r = by_case[case.case_id]
        rows.append(
            {
                "case": case.case_id,
                "best": r["ratio"],
                "best_layout": r["layout"],
                "vpp1": r["ratio_vpp1"],
                "by_micro_batch": {str(k): v for k, v in ratio_by_micro_batch(case).items()},
            }
        )
    return rows


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def sensitivity_markdown(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        "## What the unstated axes alone can move (rows whose micro-batch is not stated)",
        "",
        "Best ratio with the micro-batch pinned (the search still chooses vpp and recompute), "
        "the check's best (all open axes free) and its no-interleaving bracket (vpp 1).",
        "",
        "| case | best | its layout | vpp 1 | "
        + " | ".join(f"mbs {m}" for m in MICRO_BATCHES)
        + " |",
        "|---|---|---|---|" + "---|" * len(MICRO_BATCHES),
    ]
    for row in rows:
        cells = " | ".join(_cell(row["by_micro_batch"][str(m)]) for m in MICRO_BATCHES)
        lines.append(
            f"| {row['case']} | {_cell(row['best'])} | {row['best_layout'] or ''} | "
            f"{_cell(row['vpp1'])} | {cells} |"
        )
    return lines
