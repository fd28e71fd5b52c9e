"""Context-parallel speed-ups of the Megatron-LM CP figure, predicted layer by layer.

Used by :mod:`bench.mechanisms`. performance-facts §6.3 (MLM ``CP_results.png``, NVIDIA): GPT
175B, speed-up of per-GPU throughput over TP8 CP1 with full recompute. The figure does not state
the GPU, the network, the micro-batch or whether the other layouts recompute; we assume DGX H100
(8 x 400G NICs, 50 GB/s per GPU), micro-batch 1, full recompute only for the TP8 CP1 baseline
(CP is what lets the others drop it, MLM ``context_parallel.md``), TP communication overlap on
inside a node (the H100 prior, half hidden) and off across nodes, and for the FP8 rows GQA with
8 query groups. Everything that does not change between the layouts of one row (pipeline
bubble, DP, optimizer) cancels in a per-GPU throughput ratio and is left out.

One layer per micro-batch on one GPU = GEMMs (the dense GEMM curve of the H100 priors, backward
2 x forward) + memory-bound ops + TP all-gathers / reduce-scatters (collective curves) + the
attention of :mod:`planner.performance.ring_attention` (kernels, ring steps, exposed transfers).

The TP collectives are counted as the planner's :mod:`planner.performance.tensor_parallel` counts
them: backward runs the conjugates of the forward's 2 all-gathers + 2 reduce-scatters once
(megatron-facts §1.1), not twice like the GEMM FLOPs. Megatron's backward also re-gathers each
column-parallel input (mechanisms-facts §6.1) and runs that gather and the input gradient's
reduce-scatter asynchronously under the dgrad / wgrad GEMMs (MCore 0.5 ``tensor_parallel/
layers.py``); the planner credits neither, as the per-layer times of Korthikanti et al. 2022
Table 4 show no cheaper backward with sequence parallelism (shared rows T0036-T0037: forward 7.7
-> 7.2 ms, backward 11.9 -> 11.8 ms).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from models_db import load_gpu, load_model
from models_db.collectives import load_collective_table
from planner.layouts import FloatArray
from planner.model.shapes import Gemm, layer_shapes, sharded_width
from planner.performance.attention_kernel import attention_kernel_prior
from planner.performance.collective_bandwidth import CollectiveTable, group_params
from planner.performance.compute import elementwise_bytes_per_token, gemm_efficiency
from planner.performance.profile import PerformanceProfile, default_profile
from planner.performance.ring_attention import (
    CP_COMM_TYPES,
    AttentionShape,
    cp_attention_time,
    ring_p2p,
)
from planner.specs import GPUSpec, ModelSpec

NIC_BYTES_PER_S = 50e9  # DGX H100: one 400G ConnectX-7 per GPU (catalog dgx-h100 preset)
NODE = 8
# performance-facts §6.3: (label, seq, fp8+GQA, [(tp, cp, published speed-up)])
PUBLISHED = (
    ("BF16 MHA, 16K", 16384, False, ((16, 1, 1.13), (8, 2, 1.25))),
    ("BF16 MHA, 32K", 32768, False, ((32, 1, 0.85), (16, 2, 1.15), (8, 4, 1.20))),
    ("FP8 GQA, 16K", 16384, True, ((8, 2, 1.28),)),
    ("FP8 GQA, 32K", 32768, True, ((8, 4, 1.30),)),
)


def _gemm_seconds(
    gemms: tuple[Gemm, ...],
    tokens: float,
    tp: int,
    gpu: GPUSpec,
    prof: PerformanceProfile,
    fp8: bool,
) -> float:
    """Forward seconds of a layer's GEMMs on one GPU (the planner's dense GEMM curve)."""
    total = 0.0
    for g in gemms:
        n, k = sharded_width(g, np.array([tp]))
        width = float(np.minimum(n, k)[0])
        flop = g.fwd_flop_per_token * tokens / (tp if g.shard else 1)
        call = 2.0 * tokens * float(n[0]) * float(k[0])
        if fp8:
            peak, plateau = (
                gpu.peak_fp8_flop_per_s or gpu.peak_bf16_flop_per_s,
                prof.fp8_gemm_efficiency,
            )
            half_m, half_t = prof.fp8_half_tokens, prof.fp8_half_time_s
        else:
            peak, plateau = gpu.peak_bf16_flop_per_s, prof.gemm_efficiency
            half_m, half_t = prof.gemm_half_tokens, prof.gemm_half_time_s
        eff = float(gemm_efficiency(tokens, width, plateau, half_m, 0.0, call, half_t * peak))
        total += flop / (peak * eff)
    return total


def _tp_seconds(table: CollectiveTable, tp: int, tensor_bytes: float) -> tuple[float, bool]:
    """One all-gather + one reduce-scatter of the layer input (nccl size = the full tensor),
    per half-layer; 2 of each per layer forward, their conjugates in backward (the caller)."""
    n = np.array([float(tp)])
    per_node = np.array([float(min(tp, NODE))])
    total = 0.0
    for op in ("all_gather", "reduce_scatter"):
        beta, half = group_params(table, op, n, per_node, NIC_BYTES_PER_S)  # type: ignore[arg-type]
        f = (tp - 1) / tp
        total += float(f * (tensor_bytes + half[0]) / beta[0])
    return total, tp > NODE


def layer_seconds(
    model: ModelSpec, seq: int, tp: int, cp: int, *, fp8: bool, recompute: bool
) -> dict[str, float]:
    """Forward + backward seconds of one layer per micro-batch (b = 1) on one GPU."""
    gpu = load_gpu("h100-sxm-80gb")
    prof = default_profile(gpu)
    table = load_collective_table(gpu.name)
    assert table is not None
    sh = layer_shapes(model)
    tokens = seq / cp
    gemm_f = _gemm_seconds(sh.attention_gemms + sh.dense_mlp_gemms, tokens, tp, gpu, prof, fp8)
    dense_bytes, _, _ = elementwise_bytes_per_token(model, np.array([tp]), np.array([1.0]), fp8)
    hbm = gpu.hbm_bandwidth_bytes_per_s * prof.hbm_efficiency
    mem_f = float(dense_bytes[0]) * tokens / hbm
    tp_one, crosses = _tp_seconds(table, tp, tokens * model.hidden_size * 2.0)
    hidden = 0.0 if crosses else prof.tp_overlap
    tp_f = 2.0 * tp_one * (1.0 - hidden)  # AG + RS before/after attention and MLP
    heads = model.num_attention_heads / tp
    kv_heads = max(1.0, model.query_groups / tp)
    shape = AttentionShape(
        batch=np.array([1.0]),
        seq_length=np.array([float(seq)]),
        cp=np.array([float(cp)]),
        heads=np.array([heads]),
        kv_heads=np.array([kv_heads]),
        head_dim=model.head_dim,
    )
    kernel = attention_kernel_prior(gpu)
    assert kernel is not None
    att = cp_attention_time(
        "p2p",
        kernel,
        shape,
        table=table,
        tp=np.array([float(tp)]),
        gpus_per_node=NODE,
        nic_bytes_per_s=NIC_BYTES_PER_S,
        hbm_bytes_per_s=hbm,
    )
    fwd = gemm_f + mem_f + tp_f + float(att.fwd_s[0])
    bwd = 2.0 * (gemm_f + mem_f) + tp_f + float(att.bwd_s[0])  # TP: the forward's conjugates
    return {
        "gemm_s": 3.0 * gemm_f,
        "memory_bound_s": 3.0 * mem_f,
        "tp_comm_exposed_s": 2.0 * tp_f,
        "attention_kernels_s": float(att.fwd_attention_s[0] + att.bwd_attention_s[0]),
        "cp_exposed_s": float(att.fwd_exposed_s[0] + att.bwd_exposed_s[0] + att.correction_s[0]),
        "recompute_s": fwd if recompute else 0.0,
        "total_s": fwd + bwd + (fwd if recompute else 0.0),
    }


def cp_speedups() -> list[dict[str, Any]]:
    """Predicted versus published speed-ups of the CP figure (per-GPU throughput ratios)."""
    base_model = load_model("gpt3-175b")
    rows: list[dict[str, Any]] = []
    for label, seq, fp8_gqa, cases in PUBLISHED:
        model = replace(base_model, num_query_groups=8) if fp8_gqa else base_model
        base = layer_seconds(model, seq, 8, 1, fp8=fp8_gqa, recompute=True)
        for tp, cp, published in cases:
            lay = layer_seconds(model, seq, tp, cp, fp8=fp8_gqa, recompute=False)
            predicted = (8 * 1 * base["total_s"]) / (tp * cp * lay["total_s"])
            rows.append(
                {
                    "case": label,
                    "seq_length": seq,
                    "tp": tp,
                    "cp": cp,
                    "published_speedup": published,
                    "predicted_speedup": round(predicted, 3),
                    "error": round(predicted / published - 1.0, 3),
                    "layer_ms": {k: round(v * 1e3, 3) for k, v in lay.items()},
                    "baseline_layer_ms": {k: round(v * 1e3, 3) for k, v in base.items()},
                }
            )
    return rows


def cp_step_table() -> list[dict[str, Any]]:
    """Exposed CP time per layer across sequence lengths, CP sizes and links (H100 priors)."""
    gpu = load_gpu("h100-sxm-80gb")
    table = load_collective_table(gpu.name)
    assert table is not None
    prof = default_profile(gpu)
    hbm = gpu.hbm_bandwidth_bytes_per_s * prof.hbm_efficiency
    kernel = attention_kernel_prior(gpu)
    assert kernel is not None
    out: list[dict[str, Any]] = []
    for name, heads, kv in (
        ("70B GQA (a_l 8, g_l 1)", 8.0, 1.0),
        ("7B MHA (a_l 32, g_l 32)", 32.0, 32.0),
    ):
        for seq in (32768, 131072):
            for cp in (2, 4, 8, 16):
                row: dict[str, Any] = {"layer": name, "seq_length": seq, "cp": cp}
                for link, members in (("nvlink", 2.0), ("network", 1.0)):
                    beta, half = group_params(
                        table, "send_recv", np.array([2.0]), np.array([members]), NIC_BYTES_PER_S
                    )
                    shape = AttentionShape(
                        batch=np.array([1.0]),
                        seq_length=np.array([float(seq)]),
                        cp=np.array([float(cp)]),
                        heads=np.array([heads]),
                        kv_heads=np.array([kv]),
                        head_dim=128,
                    )
                    r = ring_p2p(
                        kernel, shape, p2p_beta_max=beta, p2p_s_half=half, hbm_bytes_per_s=hbm
                    )
                    exposed: FloatArray = r.fwd_exposed_s + r.bwd_exposed_s + r.correction_s
                    row[f"{link}_exposed_share"] = round(float(exposed[0] / r.total_s[0]), 3)
                row["attention_ms"] = round(
                    float(r.fwd_attention_s[0] + r.bwd_attention_s[0]) * 1e3, 3
                )
                out.append(row)
    return out


def cp_variants() -> list[dict[str, Any]]:
    """The four ``--cp-comm-type`` values head to head (no published comparison exists,
    mechanisms-facts §9.2): a 7B-like MHA layer (32 heads, t = 1) at s = 128K on H100 nodes."""
    gpu = load_gpu("h100-sxm-80gb")
    table = load_collective_table(gpu.name)
    assert table is not None
    hbm = gpu.hbm_bandwidth_bytes_per_s * default_profile(gpu).hbm_efficiency
    kernel = attention_kernel_prior(gpu)
    assert kernel is not None
    out: list[dict[str, Any]] = []
    for cp in (8, 16, 32):
        c = np.array([float(cp)])
        shape = AttentionShape(
            batch=np.array([1.0]),
            seq_length=np.array([131072.0]),
            cp=c,
            heads=np.array([32.0]),
            kv_heads=np.array([32.0]),
            head_dim=128,
        )
        variants = {
            name: cp_attention_time(
                name,
                kernel,
                shape,
                table=table,
                tp=np.array([1.0]),
                gpus_per_node=NODE,
                nic_bytes_per_s=NIC_BYTES_PER_S,
                hbm_bytes_per_s=hbm,
            )
            for name in CP_COMM_TYPES
        }
        row: dict[str, Any] = {"cp": cp, "crosses_nodes": bool(cp > NODE)}
        for name, r in variants.items():
            total = float(r.total_s[0])
            row[f"{name}_ms"] = round(total * 1e3, 2) if np.isfinite(total) else None
        out.append(row)
    return out
