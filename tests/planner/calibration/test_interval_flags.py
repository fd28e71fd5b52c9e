"""A plan says whose errors its band is and when its stack leaves the calibrated runs (issue 12
item 9; brief bandpub9)."""

from __future__ import annotations

from typing import Any

from planner.calibration.intervals import (
    TRANSFERRED,
    IntervalTable,
    stack_values,
    uncertainty,
)
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.calibration.test_intervals import CALIBRATED
from tests.planner.fixtures import H100, LLAMA_70B, MIXTRAL_8X7B

FITTED = default_profile(H100).with_coefficients(provenance={"kind": "fitted"})
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
JOB = TrainingJob(seq_length=4096, global_batch_size=256)


def table(stack: dict[str, list[str]] | None = None, **bands: dict[str, float]) -> IntervalTable:
    return IntervalTable.from_dict(
        {
            "low_quantile": 0.1,
            "high_quantile": 0.9,
            "min_rows": 10,
            "bands": {"all": {"n": 100, "low": 0.8, "high": 1.2}, **bands},
            "calibrated": CALIBRATED | ({"stack": stack} if stack is not None else {}),
        }
    )


def _uncertainty(t: IntervalTable, layout: Layout, **kw: Any) -> dict[str, Any]:
    return uncertainty(
        t,
        kw.get("model", LLAMA_70B),
        CLUSTER,
        kw.get("job", JOB),
        layout,
        kw.get("profile", FITTED),
        tokens_per_s_per_gpu=1000.0,
        step_time_s=10.0,
    )


def test_a_band_borrowed_from_a_parent_regime_says_so() -> None:
    own = {"n": 4, "low": 0.99, "high": 1.01, "effective_rows": 2.5}
    out = _uncertainty(table(**{"dense/multi-node/cp=1/bf16": own}), Layout(tp=4, pp=2, dp=8))
    info = out["interval"]
    assert info["regime"] == "all" and info["layout_regime"] == "dense/multi-node/cp=1/bf16"
    assert "2.5 effective held-out rows (fewer than 10)" in info["fallback"]
    assert "the band is that of all" in info["fallback"]


def test_a_regime_with_no_rows_says_it_has_none() -> None:
    out = _uncertainty(table(), Layout(tp=4, pp=2, dp=8))
    assert "has no calibrated rows" in out["interval"]["fallback"]


def test_a_band_of_the_layouts_own_regime_carries_no_fallback() -> None:
    own = {"n": 40, "low": 0.9, "high": 1.1}
    out = _uncertainty(table(**{"dense/multi-node/cp=1/bf16": own}), Layout(tp=4, pp=2, dp=8))
    assert out["interval"]["regime"] == "dense/multi-node/cp=1/bf16"
    assert "fallback" not in out["interval"]


def test_a_transferred_profile_says_its_band_is_leave_one_gpu_out() -> None:
    t = table(**{TRANSFERRED: {"n": 100, "low": 0.7, "high": 1.3}})
    out = _uncertainty(t, Layout(tp=4, pp=2, dp=8), profile=default_profile(H100))
    assert out["interval"]["regime"] == TRANSFERRED
    assert "leave-one-GPU-type-out" in out["interval"]["fallback"]


def test_a_stack_setting_no_calibrated_run_used_is_flagged() -> None:
    stack = {"cuda_graphs": ["none"], "grad_reduce_dtype": ["fp32"], "tp_comm_overlap": ["true"]}
    graphs = Layout(tp=4, pp=2, dp=8, cuda_graphs="partial", grad_reduce_dtype="bf16")
    text = " | ".join(_uncertainty(table(stack), graphs)["extrapolation"])
    assert "cuda_graphs=partial: no calibrated run used it (they ran none)" in text
    assert "grad_reduce_dtype=bf16" in text
    assert "tp_comm_overlap" not in text  # the job's value was calibrated
    assert _uncertainty(table(stack), Layout(tp=4, pp=2, dp=8))["extrapolation"] == []


def test_a_table_without_a_stack_range_checks_no_stack() -> None:
    graphs = Layout(tp=4, pp=2, dp=8, cuda_graphs="partial")
    assert _uncertainty(table(), graphs)["extrapolation"] == []


def test_the_moe_stack_is_read_with_the_planners_auto_choices_made_explicit() -> None:
    """The dispatcher and EP overlap a MoE plan leaves to 'auto' are what it is priced with; a
    dense model has neither."""
    lay = Layout(tp=1, pp=1, ep=8, dp=64)
    moe = stack_values(MIXTRAL_8X7B, CLUSTER, JOB, lay)
    assert moe["moe_dispatcher"] in ("alltoall", "flex")
    assert moe["moe_a2a_overlap"] in ("true", "false")
    dense = stack_values(LLAMA_70B, CLUSTER, JOB, Layout(tp=8, dp=8))
    assert "moe_dispatcher" not in dense and dense["tp_comm_overlap"] == "true"
    flex = stack_values(MIXTRAL_8X7B, CLUSTER, JOB, Layout(ep=8, dp=64, moe_dispatcher="flex"))
    assert flex["moe_dispatcher"] == "flex"
    stack = {"moe_dispatcher": ["alltoall"]}
    out = _uncertainty(table(stack), Layout(ep=8, dp=64, moe_dispatcher="flex"), model=MIXTRAL_8X7B)
    assert any(w.startswith("moe_dispatcher=flex") for w in out["extrapolation"])


def test_the_shipped_table_flags_an_fp8_recipe_the_calibrated_rows_did_not_run() -> None:
    """The shipped fp8 rows ran delayed scaling (models_db/measurement_stacks.csv): an fp8 plan
    on Hopper with the recipe unset runs tensorwise and must say its band is off those runs; a
    named delayed recipe and a bf16 job carry no recipe flag."""
    from models_db.intervals import load_interval_table

    shipped = load_interval_table()
    assert shipped is not None
    assert shipped.calibrated.stack.get("fp8_recipe") == ("delayed",)
    lay = Layout(tp=4, pp=2, dp=8)
    fp8 = TrainingJob(seq_length=4096, global_batch_size=256, precision="fp8")
    text = " | ".join(_uncertainty(shipped, lay, job=fp8)["extrapolation"])
    assert "fp8_recipe=tensorwise: no calibrated run used it (they ran delayed)" in text
    delayed = TrainingJob(seq_length=4096, global_batch_size=256, precision="fp8",
                          fp8_recipe="delayed")  # fmt: skip
    assert not any(
        "fp8_recipe" in w for w in _uncertainty(shipped, lay, job=delayed)["extrapolation"]
    )
    assert not any("fp8_recipe" in w for w in _uncertainty(shipped, lay)["extrapolation"])
