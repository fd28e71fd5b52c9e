"""The host model's stated facts, one by one (mechanisms-facts §3.1, §3.2, §3.4), for
:mod:`bench.mechanisms`: the kernel counts the host term launches against the sheet's table, the
number of graphs a ``partial`` micro-batch launches against its graph count, and where the
launch queue starts to bind against §3.1's rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from planner.performance.host_overhead import (
    HostCosts,
    dense_layer_kernels,
    micro_batch_time,
    moe_layer_kernels,
)
from planner.performance.host_queue import KernelGroup, queue_time

A = np.asarray
ONE = A([1.0])


def _count(value: Any) -> float:
    return float(np.ravel(value)[0])


def kernel_count_rows() -> list[dict[str, Any]]:
    """Each §3.2 row the host term has a count for: stated value, the planner's."""
    dense = dense_layer_kernels(tp=A([8.0]), cp=ONE)
    dsv3 = dict(tp=ONE, cp=ONE, local_experts=A([8.0]))
    unfused = moe_layer_kernels(**dsv3)  # type: ignore[arg-type]
    fused = moe_layer_kernels(router_fusion=True, **dsv3)  # type: ignore[arg-type]
    deepep = moe_layer_kernels(dispatcher="flex_deepep", **dsv3)  # type: ignore[arg-type]
    one, two = (moe_layer_kernels(tp=ONE, cp=ONE, local_experts=A([e])) for e in (1.0, 2.0))
    cp4 = dense_layer_kernels(tp=A([8.0]), cp=A([4.0]))
    preprocess = 6.0  # PREPROCESS_ALLTOALL: the alltoall router region = router + preprocess
    per_expert = _count(two.fwd + two.bwd) - _count(one.fwd + one.bwd)
    return [
        _row("dense TE layer, BF16, TP+SP, forward", "14-16", _count(dense.fwd), 14, 16),
        _row("same, backward", "25-30", _count(dense.bwd), 25, 30),
        _row("MoE router, unfused (DSv3)", "72", _count(unfused.router_fwd) - preprocess, 72),
        _row("MoE router, --moe-router-fusion", "31", _count(fused.router_fwd) - preprocess, 31),
        _row("router + EP preprocess with DeepEP", "17", _count(deepep.router_fwd), 17),
        _row(
            "GroupedLinear default path, per local expert (2 linears, training)",
            "3 per expert linear",
            per_expert,
            6,
        ),
        _row(
            "CP p2p c = 4, per layer forward (c calls + c-1 send/recv + ~2c corrections)",
            "c + (c-1) + 2c = 15 in place of 1 call",
            _count(cp4.fwd) - _count(dense.fwd) + 1,
            15,
        ),
    ]


def _row(
    item: str, stated: str, planner: float, lo: float, hi: float | None = None
) -> dict[str, Any]:
    top = lo if hi is None else hi
    return {"item": item, "stated": stated, "planner": planner, "ok": lo <= planner <= top}


def graph_count_row(layers: int = 24, micro_batches: int = 6) -> dict[str, Any]:
    """§3.4: graph count = L_local x m x 2. The host term launches one graph per layer and pass
    under ``partial``; read back from its host seconds with every launch but the graphs free."""
    costs = HostCosts(per_kernel_s=0.0, per_graph_launch_s=1.0, per_sync_s=0.0,
                      per_micro_batch_s=0.0)  # fmt: skip
    r = micro_batch_time(
        dense_layers=A([0.0]),
        moe_layers=A([float(layers)]),
        dense_gpu_fwd_s=A([0.0]),
        dense_gpu_bwd_s=A([0.0]),
        moe_gpu_fwd_s=A([1e-3]),
        moe_gpu_bwd_s=A([2e-3]),
        dense_kernels=dense_layer_kernels(tp=A([2.0]), cp=ONE, mlp_captured=False),
        moe_kernels=moe_layer_kernels(tp=A([2.0]), cp=ONE, local_experts=A([32.0])),
        cuda_graphs="partial",
        dispatcher="alltoall",
        costs=costs,
        moe_eager_share=0.5,
    )
    planner = _count(r.host_s) * micro_batches
    stated = layers * micro_batches * 2
    return {"layers": layers, "micro_batches": micro_batches, "stated": stated,
            "planner": planner, "ok": planner == stated}  # fmt: skip


def binding_rows(host_per_kernel_s: float = 10e-6, kernels: int = 100) -> list[dict[str, Any]]:
    """§3.1: the host binds when mean GPU kernel time < host time per kernel. A stretch of
    ``kernels`` alike kernels right after a sync, followed by one long GEMM (5 ms): what the
    launches add to the GPU's time, as the stretch's mean GPU time per kernel varies."""
    rows = []
    for mean_us in (2.5, 5.0, 7.5, 10.0, 15.0, 20.0):
        stretch = KernelGroup(host_s=A([kernels * host_per_kernel_s]),
                              gpu_s=A([kernels * mean_us * 1e-6]))  # fmt: skip
        gemm = KernelGroup(host_s=A([host_per_kernel_s]), gpu_s=A([5e-3]))
        gpu = kernels * mean_us * 1e-6 + 5e-3
        queued = float(queue_time([stretch, gemm])[0])
        optimistic = max(gpu, kernels * host_per_kernel_s + host_per_kernel_s)
        rows.append({
            "mean_gpu_us_per_kernel": mean_us,
            "exposed_us": round((queued - gpu) * 1e6, 1),
            "max_bound_exposed_us": round((optimistic - gpu) * 1e6, 1),
        })  # fmt: skip
    return rows


def host_facts_markdown(
    data: dict[str, Any], table: Callable[[list[str], list[list[Any]]], list[str]]
) -> list[str]:
    """The markdown of the rows above, for bench.mechanisms' §3 (its ``table`` helper)."""
    out = ["Kernel counts the host term launches, against mechanisms-facts §3.2:", ""]
    out += table(
        ["item", "stated", "planner", "agrees"],
        [[r["item"], r["stated"], r["planner"], r["ok"]] for r in data["host_kernel_counts"]],
    )
    g = data["host_graph_count"]
    out += [
        f"Graph count (§3.4: L_local x m x 2): {g['layers']} layers x {g['micro_batches']} "
        f"micro-batches: stated {g['stated']}, the host term launches {g['planner']:g}.",
        "",
        "Where the launch queue binds (§3.1: 'when mean GPU kernel time < host time per "
        "kernel'): 100 alike kernels right after a sync, then a 5 ms GEMM, 10 us of host time "
        "per launch. The queue (`planner/performance/host_queue.py`) exposes the stretch's "
        "launches as soon as its kernels are shorter than their launches, although the GPU's "
        "total stays far above the host's; max(GPU, host) never does.",
        "",
    ]
    out += table(
        ["mean GPU us per kernel", "exposed us (queue)", "exposed us (max(G, H))"],
        [
            [r["mean_gpu_us_per_kernel"], r["exposed_us"], r["max_bound_exposed_us"]]
            for r in data["host_binding"]
        ],
    )
    return out
