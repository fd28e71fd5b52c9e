"""Physics pieces of the throughput model: GEMM size factor (against the measured H100 kernel
rates in bench/results/gpu_kernels.json), all-to-all across nodes, pipeline splits."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from planner.layouts import LayoutBatch
from planner.model.pipeline import stage_layers
from planner.performance.collectives import Links, all_to_all_time, ring_time
from planner.performance.compute import gemm_efficiency
from planner.performance.step_time import PerformanceProfile
from planner.specs import Layout
from tests.planner.fixtures import LLAMA_8B

KERNELS = Path(__file__).resolve().parents[3] / "bench" / "results" / "gpu_kernels.json"
LINKS = Links(
    gpus_per_node=8,
    nvlink_busbw_bytes_per_s=300e9,
    nic_busbw_bytes_per_s=40e9,
    intra_latency_s=0.0,
    inter_latency_s=0.0,
)
PEAK = 989.4e12


def test_size_factor_halves_efficiency_at_the_half_flop() -> None:
    eff = gemm_efficiency(1e9, 1e9, 0.7, 0.0, 0.0, flop=5e9, half_flop=5e9)
    assert float(eff) == 0.35


def test_hopper_prior_reproduces_measured_h100_gemm_rates() -> None:
    prof = PerformanceProfile(gpu="h100-sxm-80gb")
    rows = json.loads(KERNELS.read_text())["h100-sxm-80gb"]["gemm"]
    rows = [r for r in rows if r["dtype"] == "bf16"]
    m = np.array([r["m"] for r in rows], float)
    n = np.array([r["n"] for r in rows], float)
    k = np.array([r["k"] for r in rows], float)
    measured = np.array(
        [3 / sum(1 / r[f] for f in ("fwd_flop_per_s", "dgrad_flop_per_s", "wgrad_flop_per_s"))
         for r in rows]
    ) / PEAK  # fmt: skip
    model = gemm_efficiency(
        m,
        np.minimum(n, k),
        prof.gemm_efficiency,
        prof.gemm_half_tokens,
        prof.gemm_half_width,
        2 * m * n * k,
        prof.gemm_half_time_s * PEAK,
    )
    assert float(np.median(np.abs(model / measured - 1))) < 0.08


def test_all_to_all_across_nodes_is_bound_by_one_nic_not_a_ring_of_nics() -> None:
    size, stride, buf = np.array([16]), np.array([1]), np.array([1e9])
    a2a = float(all_to_all_time(LINKS, size, stride, buf)[0])
    assert a2a == 0.5 * 1e9 / 40e9  # half the buffer leaves the node through one NIC
    assert a2a > float(ring_time(LINKS, size, stride, buf, 1.0)[0])


def test_all_to_all_inside_a_node_uses_nvlink() -> None:
    a2a = float(all_to_all_time(LINKS, np.array([8]), np.array([1]), np.array([8e9]))[0])
    assert a2a == 7 / 8 * 8e9 / 300e9


def test_stage_layers_follow_megatrons_embedding_and_loss_split() -> None:
    # 10 layers on 4 ranks: (10 + 2) / 4 = 3 per rank, first and last rank one fewer
    batch = LayoutBatch.from_layouts([Layout(tp=1, pp=4, dp=1, micro_batch_size=1)])
    layers = stage_layers(replace(LLAMA_8B, num_layers=10), batch)
    busiest, last = layers.busiest, layers.last
    assert (float(busiest[0]), float(last[0])) == (3.0, 2.0)


def test_stage_layers_of_an_even_split() -> None:
    batch = LayoutBatch.from_layouts([Layout(tp=1, pp=4, vpp=2, dp=1, micro_batch_size=1)])
    layers = stage_layers(LLAMA_8B, batch)
    busiest, last = layers.busiest, layers.last
    assert (float(busiest[0]), float(last[0])) == (8.0, 8.0)
