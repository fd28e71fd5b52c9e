"""How the CLI tables show a prediction's interval and its extrapolation warnings."""

from __future__ import annotations

from typing import Any


def band_note(band: dict[str, Any]) -> str:
    """What the brackets are: the band's rule as the planner states it (``interval.band``: e.g.
    widened for a campaign the fit never saw, or narrowed by a calibrated cluster's level), and
    whose held-out errors it was measured on."""
    regime = f" of {band['regime']} runs" if band.get("regime") else ""
    rule = band.get("band")
    if not rule:
        return (
            f"tokens/s/GPU in brackets: the 80 % prediction band of cross-validated "
            f"errors{regime} (models_db/intervals)"
        )
    return f"tokens/s/GPU in brackets: {rule}; residuals{regime} (models_db/intervals)"


def tokens_cell(perf: dict[str, Any]) -> str:
    """'12,345 (11,020-13,210)': the prediction with its band, when it has one."""
    tokens = perf.get("tokens_per_s_per_gpu")
    if tokens is None:
        return "-"
    band = perf.get("tokens_per_s_per_gpu_interval")
    if not band:
        return f"{tokens:,.0f}"
    return f"{tokens:,.0f} ({band[0]:,.0f}-{band[1]:,.0f})"


def print_uncertainty(console: Any, perf: dict[str, Any] | None) -> None:
    """The band's meaning and the extrapolation reasons of one prediction, under a table."""
    if not perf or not perf.get("tokens_per_s_per_gpu_interval"):
        return
    band = perf.get("interval") or {}
    console.print(band_note(band), highlight=False)
    if band.get("fallback"):  # the band is not measured on this layout's own regime
        console.print(f"[yellow]band:[/] {band['fallback']}", highlight=False)
    for reason in perf.get("extrapolation") or []:
        console.print(f"[yellow]extrapolates:[/] {reason}", highlight=False)
