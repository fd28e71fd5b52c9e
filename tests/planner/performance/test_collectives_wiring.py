"""The step time prices collectives on the GPU's bandwidth-vs-size curves (issue 12 item 3)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models_db import load_gpu
from planner.performance.collectives import (
    Links,
    all_to_all_time,
    p2p_time,
    ring_time,
)
from planner.specs import ClusterSpec, GPUSpec

MIB = 2**20


def links_for(cluster: ClusterSpec, *, curves: bool = True) -> Links:
    """The Links the step context builds (context.step_context), at the profile's priors."""
    gpu = cluster.gpu
    return Links(
        gpus_per_node=cluster.gpus_per_node,
        nvlink_busbw_bytes_per_s=gpu.intra_node_bandwidth_bytes_per_s * 0.75,
        nic_busbw_bytes_per_s=cluster.inter_node_bandwidth_bytes_per_s * 0.75,
        intra_latency_s=7e-6,
        inter_latency_s=15e-6,
        table=gpu.collectives if curves else None,
        network_bytes_per_s=cluster.inter_node_bandwidth_bytes_per_s,
        single_nic_bytes_per_s=cluster.inter_node_bandwidth_bytes_per_s
        / max(cluster.nics_per_gpu, 1.0),
        mesh=cluster.intra_node_topology == "mesh",
    )


def h100(**kw: object) -> ClusterSpec:
    return ClusterSpec(name="h", gpu=load_gpu("h100-sxm-80gb"), num_gpus=64, **kw)  # type: ignore[arg-type]


def arr(*v: float) -> np.ndarray:
    return np.array(v)


def test_catalog_gpus_carry_their_curves_and_keep_them_out_of_to_dict() -> None:
    gpu = load_gpu("h100-sxm-80gb")
    assert gpu.collectives is not None and gpu.collectives.gpu == "h100-sxm-80gb"
    assert "collectives" not in gpu.to_dict()
    assert "collectives" not in h100().to_dict()["gpu"]
    assert GPUSpec.from_dict(gpu.to_dict()).collectives is None  # a user's GPU: no curves


@pytest.mark.parametrize(
    ("op", "factor", "size_mib", "measured_us"),
    [  # performance-facts §4.3, AIC nccl-tests, 8 x H100 in one node
        ("all_gather", 1.0, 16, 69),
        ("reduce_scatter", 1.0, 64, 201),
        (None, 2.0, 16, 122),  # all-reduce
        (None, 2.0, 256, 1092),
    ],
)
def test_tp_collective_in_one_node_follows_the_measured_sweep(
    op: str | None, factor: float, size_mib: int, measured_us: float
) -> None:
    t = ring_time(links_for(h100()), arr(8), arr(1), arr(size_mib * MIB), factor, op=op)  # type: ignore[arg-type]
    assert t[0] == pytest.approx(measured_us * 1e-6, rel=0.22)  # the sheet's fit error


def test_small_messages_run_far_below_the_plateau_large_ones_near_it() -> None:
    links = links_for(h100())
    sizes = arr(4 * MIB, 1024 * MIB)
    t = ring_time(links, arr(8, 8), arr(1, 1), sizes, 1.0, op="all_gather")
    busbw = 7 / 8 * sizes / t
    assert busbw[0] / 307e9 < 0.45  # 4 MiB under S_half (5.5 MiB, mechanisms-facts §2.2)
    assert busbw[1] / 307e9 > 0.98


def test_dp_buckets_each_pay_their_own_s_half() -> None:
    links = links_for(h100())
    total = arr(800 * MIB)
    one = ring_time(links, arr(8), arr(1), total, 1.0, op="reduce_scatter")
    ten = ring_time(links, arr(8), arr(1), total, 1.0, op="reduce_scatter", messages=10.0)
    s_half = links.table.curve("reduce_scatter", 8).s_half_bytes  # type: ignore[union-attr]
    assert ten[0] - one[0] == pytest.approx(9 * 7 / 8 * s_half / 309e9, rel=1e-6)


def test_ring_across_nodes_pools_nics_all_to_all_gets_one() -> None:
    """performance-facts §4.2/§4.4: a ring reaches g x NIC, an all-to-all one NIC per GPU."""
    eight = links_for(h100(nics_per_node=8, nic_bandwidth_bytes_per_s=50e9))
    sixteen = links_for(h100(nics_per_node=16, nic_bandwidth_bytes_per_s=25e9))  # same 50/GPU
    size, stride, buf = arr(16), arr(1), arr(1024 * MIB)
    ring8 = ring_time(eight, size, stride, buf, 2.0)
    ring16 = ring_time(sixteen, size, stride, buf, 2.0)
    assert ring8[0] == pytest.approx(ring16[0])
    a2a8 = all_to_all_time(eight, size, stride, buf)
    a2a16 = all_to_all_time(sixteen, size, stride, buf)
    assert a2a16[0] > 1.8 * a2a8[0]  # one 25 GB/s NIC instead of one 50 GB/s NIC
    # 32 x H100 over 8 x 400G: ~48 GB/s all-to-all busbw per GPU (performance-facts §4.2)
    bus = (31 / 32) * 1024 * MIB / all_to_all_time(eight, arr(32), stride, buf)[0]
    assert 40e9 < bus < 50e9


def test_mesh_pairs_get_one_link_of_the_gpus_scale_up_bandwidth() -> None:
    switch = links_for(h100(gpus_per_node=8))
    mesh = links_for(h100(gpus_per_node=8, intra_node_topology="mesh"))
    msg = arr(256 * MIB)
    no = np.array([False])
    assert p2p_time(mesh, no, msg)[0] > 5 * p2p_time(switch, no, msg)[0]
    # a full-node ring drives all 7 links: as fast as on the switch
    full = ring_time(mesh, arr(8), arr(1), msg, 2.0)
    assert full[0] == pytest.approx(ring_time(switch, arr(8), arr(1), msg, 2.0)[0])
    # constant model: the same split
    m0, s0 = (
        links_for(replace(h100(intra_node_topology="mesh")), curves=False),
        links_for(h100(), curves=False),
    )
    assert p2p_time(m0, no, msg)[0] > 5 * p2p_time(s0, no, msg)[0]


def test_gpu_without_curves_keeps_the_constant_model() -> None:
    links = links_for(h100(), curves=False)
    t = ring_time(links, arr(8), arr(1), arr(64 * MIB), 1.0)
    expected = 3 * 7e-6 + 7 / 8 * 64 * MIB / (450e9 * 0.75)
    assert t[0] == pytest.approx(expected, rel=1e-6)
