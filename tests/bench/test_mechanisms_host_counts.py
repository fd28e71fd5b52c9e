"""The host model's stated facts in bench.mechanisms §3 (mechanisms-facts §3.1, §3.2, §3.4)."""

from __future__ import annotations

from bench.mechanisms_host_counts import binding_rows, graph_count_row, kernel_count_rows


def test_every_stated_kernel_count_is_the_host_terms() -> None:
    rows = kernel_count_rows()
    assert len(rows) == 7
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]


def test_partial_graphs_launch_the_stated_graph_count() -> None:
    row = graph_count_row(layers=12, micro_batches=4)
    assert row["planner"] == row["stated"] == 12 * 4 * 2


def test_the_queue_binds_where_kernels_get_shorter_than_their_launches() -> None:
    """§3.1: exposed only below 10 us of GPU per kernel (the host cost per launch), growing as
    the kernels shrink, where max(GPU, host) shows nothing."""
    rows = {r["mean_gpu_us_per_kernel"]: r for r in binding_rows()}
    assert rows[2.5]["exposed_us"] > rows[5.0]["exposed_us"] > rows[7.5]["exposed_us"] > 0
    assert rows[10.0]["exposed_us"] == rows[20.0]["exposed_us"] == 0
    assert all(r["max_bound_exposed_us"] == 0 for r in rows.values())
