"""The CLI says whose held-out errors a prediction's band is, and when it is borrowed."""

from __future__ import annotations

from rich.console import Console

from app.cli.uncertainty_view import print_uncertainty, tokens_cell

PERF = {
    "tokens_per_s_per_gpu": 1000.0,
    "tokens_per_s_per_gpu_interval": [900.0, 1100.0],
    "interval": {"regime": "dense/multi-node/cp=1/bf16"},
    "extrapolation": [],
}


def _printed(perf: dict[str, object]) -> str:
    console = Console(record=True, width=200)
    print_uncertainty(console, perf)
    return console.export_text()


def test_the_band_note_names_the_regime_it_was_measured_on() -> None:
    text = _printed(PERF)
    assert "cross-validated errors of dense/multi-node/cp=1/bf16 runs" in text
    assert "band:" not in text
    assert tokens_cell(PERF) == "1,000 (900-1,100)"


def test_a_borrowed_band_says_so() -> None:
    why = "the layout's regime moe/multi-node/cp=1/bf16 has 1.7 effective held-out rows"
    text = _printed(PERF | {"interval": {"regime": "all", "fallback": why}})
    assert "errors of all runs" in text
    assert f"band: {why}" in text


def test_the_note_states_the_band_rule_the_planner_used() -> None:
    rule = "80 % predictive band widened for a campaign the fit never saw: sd 0.107"
    text = _printed(PERF | {"interval": {"regime": "dense/multi-node/cp=1/bf16", "band": rule}})
    assert f"in brackets: {rule}; residuals of dense/multi-node/cp=1/bf16 runs" in text
