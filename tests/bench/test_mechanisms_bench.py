"""The mechanisms bench against the published figures it reports (bench/mechanisms.py)."""

from __future__ import annotations

import pytest

from bench.mechanisms_cases import cross_entropy_rows, moe_gemm_rows
from bench.mechanisms_cp import cp_speedups, cp_variants, layer_seconds
from bench.mechanisms_host import CASES, kernel_path_rows, predict
from models_db import load_gpu, load_model
from planner.layouts import LayoutBatch
from planner.performance.context import step_context
from planner.performance.output_layer import heads, output_layer_comm
from planner.performance.profile import default_profile
from planner.performance.tensor_parallel import tp_comm_time, tp_layer_comm_fwd
from planner.specs import ClusterSpec, Layout, TrainingJob


@pytest.fixture(scope="module")
def speedups() -> list[dict[str, object]]:
    return cp_speedups()


def test_every_bar_of_the_cp_figure_is_within_the_issues_bar(
    speedups: list[dict[str, object]],
) -> None:
    """Issue 12 'done when': the predicted speed-up of CP on long sequences within 25 % of the
    published ones (performance-facts §6.3, Megatron CP figure), the TP16 / TP32 bars whose TP
    group spans 2 or 4 nodes included."""
    assert len(speedups) == 7
    assert len([r for r in speedups if r["tp"] == 8]) == 4
    for row in speedups:
        assert abs(float(row["error"])) <= 0.25, row  # type: ignore[arg-type]


@pytest.mark.parametrize(("seq", "tp"), [(16384, 16), (32768, 32)])
def test_the_figures_tp_term_is_the_planners(seq: int, tp: int) -> None:
    """The bench prices a TP group across 2 or 4 DGX H100 nodes as the planner does: the
    forward's 2 all-gathers + 2 reduce-scatters and their conjugates in backward, exposed
    (no userbuffers across nodes), on the pooled-NIC ring of performance-facts §4.4."""
    gpu, model = load_gpu("h100-sxm-80gb"), load_model("gpt3-175b")
    cluster = ClusterSpec(
        name="dgx-h100",
        gpu=gpu,
        num_gpus=tp,
        gpus_per_node=8,
        inter_node_bandwidth_bytes_per_s=50e9,
    )
    batch = LayoutBatch.from_layouts([Layout(tp=tp, pp=1, dp=1)])
    ctx = step_context(
        model,
        cluster,
        TrainingJob(seq_length=seq, global_batch_size=1),
        batch,
        default_profile(gpu),
    )
    # the one stage is also the loss rank: its head's output-layer gather is not a layer's
    head_s = heads(ctx) * output_layer_comm(ctx).exposed_s
    planner_layer_s = float((tp_comm_time(ctx).exposed_mb - head_s)[0] / ctx.layers_per_stage[0])
    assert planner_layer_s == pytest.approx(2 * float(tp_layer_comm_fwd(ctx)[0]))
    bench = layer_seconds(model, seq, tp, 1, fp8=False, recompute=False)
    assert bench["tp_comm_exposed_s"] == pytest.approx(planner_layer_s, rel=1e-9)


def test_cp_beats_tp_across_nodes_as_published(speedups: list[dict[str, object]]) -> None:
    """At 16K and 32K the figure ranks TP8 CP2 above TP16 CP1 and TP8 CP4 above TP32 CP1."""
    by = {(r["seq_length"], r["tp"], r["cp"]): float(r["predicted_speedup"]) for r in speedups}  # type: ignore[arg-type]
    assert by[(16384, 8, 2)] > by[(16384, 16, 1)]
    assert by[(32768, 8, 4)] > by[(32768, 16, 2)] > by[(32768, 32, 1)]


def test_cp_variants_cover_every_comm_type() -> None:
    rows = cp_variants()
    assert [r["cp"] for r in rows] == [8, 16, 32]
    inside = rows[0]
    assert inside["a2a_ms"] == inside["a2a+p2p_ms"]  # the inner group is the whole ring


def test_te_pr_2045_rows_and_cross_entropy_example() -> None:
    h100 = [r for r in moe_gemm_rows() if r["source"].startswith("TE PR")]
    assert all(abs(r["error"]) < 0.3 for r in h100)
    unfused = next(r for r in cross_entropy_rows() if r["impl"] == "unfused" and r["tp"] == 1)
    assert (unfused["held_gb"], unfused["peak_gb"]) == (4.2, 6.3)


def test_graph_speedup_of_the_launch_bound_h100_run_is_reproduced() -> None:
    """mechanisms-facts §3.5: Qwen3-30B-A3B TP2 PP2 EP4, 623 -> 484 ms; the host model (10 us
    per kernel, models_db/host_costs.json) gives the gain within 25 %."""
    case = CASES[0]
    gain = predict(case)["speedup"] - 1.0
    assert abs(gain / (case.measured_speedup - 1.0) - 1.0) <= 0.25


def test_graphs_do_not_help_the_gpu_bound_run() -> None:
    """The EP16 run of the same model: replay 42.00 s vs eager 41.36 s; predicted within 1 % of
    no change and not faster (the static-buffer copies cost a little)."""
    case = next(c for c in CASES if c.ep == 16)
    assert 0.99 <= predict(case)["speedup"] <= 1.0


def test_grouped_kernel_gains_most_with_many_small_experts() -> None:
    rows = kernel_path_rows()
    by_local = sorted(rows, key=lambda r: -r["local_experts"])
    assert by_local[0]["grouped_speedup"] > by_local[-1]["grouped_speedup"] >= 1.0
