"""Collective bandwidth versus message size (mechanisms-facts §2) against the measured sweeps."""

from __future__ import annotations

import numpy as np
import pytest

from models_db.collectives import available_collective_tables, load_collective_table
from planner.performance.collective_bandwidth import (
    CollectiveCurve,
    CollectiveTable,
    NetworkPriors,
    bus_factor,
    collective_time,
    group_collective_time,
    group_params,
    saturating_busbw,
)
from planner.specs import SpecError

MIB = 2**20
SIZES = np.array([2, 16, 64, 256]) * MIB
# performance-facts §4.3, AIC nccl-tests inside one node, n = 8: time in us at 2/16/64/256 MiB
MEASURED_US = {
    ("a100-sxm4-80gb", "all_reduce"): (54, 216, 595, 2182),
    ("a100-sxm4-80gb", "all_gather"): (33, 135, 352, 1217),
    ("a100-sxm4-80gb", "reduce_scatter"): (34, 123, 327, 1150),
    ("a100-sxm4-80gb", "all_to_all"): (39, 114, 348, 1198),
    ("h100-sxm-80gb", "all_reduce"): (38, 122, 325, 1092),
    ("h100-sxm-80gb", "all_gather"): (22, 69, 208, 729),
    ("h100-sxm-80gb", "reduce_scatter"): (18, 70, 201, 722),
    ("h100-sxm-80gb", "all_to_all"): (19, 76, 221, 764),
    ("h200-sxm-141gb", "all_reduce"): (37, 122, 320, 1053),
    ("h200-sxm-141gb", "all_gather"): (24, 67, 206, 726),
    ("b200-sxm-180gb", "all_reduce"): (32, 99, 278, 715),
    ("b200-sxm-180gb", "all_gather"): (24, 104, 138, 393),
    ("b200-sxm-180gb", "reduce_scatter"): (21, 97, 136, 396),
    ("b200-sxm-180gb", "all_to_all"): (22, 50, 139, 438),
}
# mechanisms-facts §2.2: alpha (us) of the n = 8 fits, = f S_half / beta_max
SHEET_ALPHA_US = {
    ("a100-sxm4-80gb", "all_reduce"): 35,
    ("a100-sxm4-80gb", "all_gather"): 25,
    ("h100-sxm-80gb", "all_reduce"): 26,
    ("h100-sxm-80gb", "reduce_scatter"): 13,
    ("h200-sxm-141gb", "all_gather"): 17,
    ("b200-sxm-180gb", "all_reduce"): 31,
    ("b200-sxm-180gb", "all_to_all"): 19,
}


@pytest.mark.parametrize(("gpu", "op"), sorted(MEASURED_US))
def test_curve_reproduces_the_measured_sweep_within_the_sheets_fit_error(gpu: str, op: str) -> None:
    curve = load_collective_table(gpu).curve(op, 8)  # type: ignore[union-attr]
    assert curve.fit_error is not None
    predicted = curve.time(8, SIZES)
    measured = np.array(MEASURED_US[(gpu, op)]) * 1e-6
    worst = np.max(np.abs(predicted / measured - 1.0))
    assert worst <= curve.fit_error + 0.005, f"{gpu} {op}: worst time error {worst:.0%}"


@pytest.mark.parametrize(("gpu", "op"), sorted(SHEET_ALPHA_US))
def test_s_half_and_alpha_are_the_same_model(gpu: str, op: str) -> None:
    curve = load_collective_table(gpu).curve(op, 8)  # type: ignore[union-attr]
    alpha = float(bus_factor(op, 8)) * curve.s_half_bytes / curve.beta_max_bytes_per_s
    assert alpha * 1e6 == pytest.approx(SHEET_ALPHA_US[(gpu, op)], abs=1.5)


def test_busbw_is_half_the_plateau_at_s_half_and_saturates() -> None:
    assert saturating_busbw(5 * MIB, 300e9, 5 * MIB) == pytest.approx(150e9)
    assert saturating_busbw(64 * 2**30, 300e9, 5 * MIB) == pytest.approx(300e9, rel=1e-3)


def test_bus_factors_follow_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("send_recv", 2) == pytest.approx(1.0)
    assert bus_factor("all_to_all", 1) == pytest.approx(0.0)
    assert collective_time("all_reduce", 1, 64 * MIB, 300e9, 5 * MIB) == 0.0


def test_h100_tp_sized_messages_run_far_below_the_plateau() -> None:
    """§2.2: TP/SP messages of 4-32 MiB sit at 45-85 % of the plateau."""
    curve = load_collective_table("h100-sxm-80gb").curve("all_gather", 8)  # type: ignore[union-attr]
    share = curve.busbw(np.array([4, 32]) * MIB) / curve.beta_max_bytes_per_s
    assert 0.4 <= share[0] <= 0.5 and 0.8 <= share[1] <= 0.9


def test_group_size_picks_the_largest_fitted_size_below() -> None:
    table = load_collective_table("h100-sxm-80gb")
    assert table is not None
    assert table.curve("all_reduce", 3).group_size == 2
    assert table.curve("all_reduce", 16).group_size == 8
    beta, _ = table.intra_params("all_reduce", np.array([2.0, 4.0, 8.0]))
    assert list(beta / 1e9) == [285.0, 324.0, 398.0]


def test_four_node_efa_sweep_of_the_sheet() -> None:
    """§2.3: 4 x 8 B200 over 8 x EFA 400G (50 GB/s per GPU), all-reduce busbw."""
    table = load_collective_table("b200-sxm-180gb")
    assert table is not None
    sizes = np.array([16 * MIB, 64 * MIB, 256 * MIB, 2**30, 4 * 2**30])
    measured = np.array([64, 157, 229, 362, 377]) * 1e9
    n = np.full(5, 32.0)
    t = group_collective_time(table, "all_reduce", n, np.full(5, 8.0), sizes, 50e9)
    busbw = float(bus_factor("all_reduce", 32)) * sizes / t
    assert np.all(np.abs(busbw / measured - 1.0) < 0.3)
    # cross-node S_half is an order of magnitude larger than NVLink's 4-13 MiB (§2.2-2.3)
    _, half = group_params(table, "all_reduce", n, np.full(5, 8.0), 50e9)
    assert half[0] > 5 * table.curve("all_reduce", 8).s_half_bytes


def test_network_limits_by_link_kind() -> None:
    table = load_collective_table("h100-sxm-80gb")
    assert table is not None
    n = np.array([16.0, 16.0])
    # a ring pools the NICs of its members on a node; an all-to-all gets one NIC per GPU
    ring, _ = group_params(table, "all_gather", n, np.array([8.0, 1.0]), 50e9)
    a2a, _ = group_params(table, "all_to_all", n, np.array([8.0, 8.0]), 50e9)
    p2p, _ = group_params(table, "send_recv", np.array([2.0, 2.0]), np.array([1.0, 2.0]), 50e9)
    # eight NICs would give 382 GB/s, but the ring also crosses NVLink: capped by the 8-GPU
    # all-gather inside a node (307 GB/s)
    assert ring[0] == pytest.approx(307e9) and ring[1] == pytest.approx(0.955 * 50e9)
    assert np.all(a2a == pytest.approx(0.96 * 50e9))
    assert p2p[0] == pytest.approx(0.93 * 50e9) and p2p[1] == pytest.approx(180e9)


def _mesh_table() -> CollectiveTable:
    curves = tuple(
        CollectiveCurve(
            op=op, link="mesh", group_size=8, beta_max_bytes_per_s=300e9, s_half_bytes=4 * MIB
        )
        for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
    )
    net = NetworkPriors(
        ring_efficiency=0.9,
        ring_s_half_bytes=80 * MIB,
        all_to_all_efficiency=0.9,
        all_to_all_s_half_bytes=80 * MIB,
        send_recv_efficiency=0.9,
        send_recv_s_half_bytes=MIB,
    )
    return CollectiveTable(
        gpu="x", link="mesh", curves=curves, network=net, mesh_link_bytes_per_s=48e9
    )


def test_a_mesh_gives_a_small_group_only_its_own_links() -> None:
    """catalog-facts §2.3: on a full mesh one peer pair gets one link (~48 GB/s usable)."""
    table = _mesh_table()
    beta, _ = table.intra_params("all_reduce", np.array([2.0, 4.0, 8.0]))
    assert list(beta / 1e9) == [48.0, 144.0, 300.0]
    p2p, _ = table.intra_params("send_recv", np.array([2.0]))
    assert p2p[0] == pytest.approx(48e9)


def test_bad_tables_are_rejected_with_the_field() -> None:
    with pytest.raises(SpecError, match="mesh_link_bytes_per_s"):
        CollectiveTable(
            gpu="x", link="mesh", curves=_mesh_table().curves, network=_mesh_table().network
        )
    with pytest.raises(SpecError, match="no curve for send_recv"):
        CollectiveTable(
            gpu="x", link="switch", curves=_mesh_table().curves[:4], network=_mesh_table().network
        )
    with pytest.raises(SpecError, match="beta_max"):
        CollectiveCurve(
            op="all_reduce", link="switch", group_size=8, beta_max_bytes_per_s=0, s_half_bytes=1.0
        )


def test_every_shipped_table_loads_and_cites_its_sources() -> None:
    slugs = available_collective_tables()
    assert {"a100-sxm4-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb"} <= set(slugs)
    for slug in slugs:
        table = load_collective_table(slug)
        assert table is not None and table.gpu == slug
        assert all(c.source for c in table.curves)
        assert len(table.network.sources) == 6
    assert load_collective_table("mi300x-192gb") is None
