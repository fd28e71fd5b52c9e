"""CUDA-graph speed-ups predicted by the host model (mechanisms-facts §3.5), for bench.mechanisms.

Each published case is a pair of runs of one layout that differ only in what CUDA graphs capture.
The planner's own host term (:mod:`planner.performance.host_term`: kernels x host cost per launch,
the dispatcher's device-to-host syncs, one replay per captured region) prices both runs; the GPU
time of the layout is the planner's, rescaled by one factor so that the *graphed* run takes the
published time (its TFLOP/s). The predicted speed-up is then eager time / graphed time at that GPU
time: the anchor fixes how large the GPU work is, the host model alone decides how much of it
the host's launches stretch, and how much graphs give back.

What the sources do not state is an assumption of the case, listed in its ``assumed`` text:
sequence 4096 and micro-batch 1 (the Bridge recipes of these models), force-balanced routing
(NVIDIA's benchmarks, performance-facts §5.3), no recompute, the pipeline bubble and the
optimizer inside the anchor (the GPU time per micro-batch is an upper bound by their share).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from models_db import load_model
from models_db.catalog import load_cluster_preset
from models_db.profiles import load_profile
from planner import Layout, LayoutBatch, TrainingJob, estimate_performance
from planner.layout_types import CudaGraphs
from planner.model.flops import flops_per_token, padded_vocab
from planner.performance.context import step_context
from planner.performance.host_term import host_exposed_time
from planner.performance.profile import PerformanceProfile
from planner.performance.step_time import stage_gpu_time
from planner.specs import ClusterSpec, ModelSpec

Graphs = tuple[CudaGraphs, bool]
"""What a run captures: the cuda_graphs setting and whether shared experts are captured."""
EAGER: Graphs = ("none", False)
PARTIAL: Graphs = ("partial", False)
PARTIAL_SHARED: Graphs = ("partial", True)


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphCase:
    label: str
    source: str
    model: str
    cluster: str
    gpus: int
    tp: int
    pp: int
    ep: int
    etp: int = 1
    vpp: int = 1
    gbs: int
    precision: Literal["bf16", "fp8"] = "bf16"
    dispatcher: Literal["alltoall", "flex"] = "alltoall"
    before: Graphs = EAGER
    after: Graphs = PARTIAL
    measured_speedup: float
    """Time before / time after (or TFLOP/s after / before)."""
    after_ms: float | None = None
    """Iteration time of the 'after' run where published: with its TFLOP/s it gives the tokens
    per iteration, hence the micro-batches m and the 1F1B bubble (otherwise m = gbs / dp)."""
    after_tflops: float | None
    """Model TFLOP/s per GPU of the 'after' run: the GPU-time anchor. None: the GPU scale of
    ``scale_from`` (the same model on the same GPU)."""
    scale_from: str = ""
    assumed: str = ""
    seq: int = 4096
    mbs: int = 1
    gpus_per_node: int | None = None
    """NVLink domain size when the job uses part of a rack (64 of an NVL72's 72)."""


# MLM-DSV3 §4: 256 GB200, TP1 PP8 VPP4 EP32, MBS 1, GBS 2048, MXFP8, DeepEP (flex)
DSV3_GB200: dict[str, Any] = {
    "model": "deepseek-v3",
    "cluster": "gb200-nvl72",
    "gpus": 256,
    "gpus_per_node": 64,
    "tp": 1,
    "pp": 8,
    "vpp": 4,
    "ep": 32,
    "gbs": 2048,
    "precision": "fp8",
    "dispatcher": "flex",
}

CASES: tuple[GraphCase, ...] = (
    GraphCase(
        label="Qwen3-30B-A3B, 16 H100, TP2 PP2 EP4, graphs attn+router+preprocess",
        source="MB cuda-graphs card: 623 -> 484 ms, 214 -> 274 TFLOP/s",
        model="qwen3-30b-a3b",
        cluster="dgx-h100",
        gpus=16,
        tp=2,
        pp=2,
        ep=4,
        gbs=24,
        measured_speedup=623.0 / 484.0,
        after_tflops=274.0,
        after_ms=484.0,
        assumed="ETP 1 (the Bridge MoE recipes); GBS 24 (the published time x TFLOP/s gives "
        "92k tokens per iteration)",
    ),
    GraphCase(
        label="GPT-OSS-20B, 16 H100, TP2 PP4 EP4, graphs attn+router+preprocess",
        source="MB cuda-graphs card: 467-520 -> 391-399 ms (mid 493.5 -> 395), "
        "37.9-42.2 -> 49.4-50.4 TFLOP/s",
        model="gpt-oss-20b",
        cluster="dgx-h100",
        gpus=16,
        tp=2,
        pp=4,
        ep=4,
        gbs=4,
        measured_speedup=493.5 / 395.0,
        after_tflops=49.9,
        after_ms=395.0,
        assumed="16 GPUs (EP4 with TP2 needs DP 2); ETP 1; GBS 4 (time x TFLOP/s: 12.6k "
        "tokens per iteration); gpt-oss-20b = the "
        "gpt-oss-120b shape with 24 layers and 32 experts [U: gpt-oss model card, "
        "not in catalog-facts]",
    ),
    GraphCase(
        label="Qwen3-30B-A3B, 16 H100, TP1 PP1 EP16, alltoall, 48 layers captured",
        source="MB cuda-graphs card (2026-05-18): replay 42.00 s vs eager 41.36 s",
        model="qwen3-30b-a3b",
        cluster="dgx-h100",
        gpus=16,
        tp=1,
        pp=1,
        ep=16,
        gbs=32,
        measured_speedup=41.36 / 42.00,
        after_tflops=None,
        scale_from="qwen3-30b-a3b",
        assumed="PP 1 (all 48 layers captured on one rank) and EP 16 (the Bridge MoE "
        "guide's Qwen3-30B-A3B alltoall run on 16 H100, mechanisms-facts §6.7) [inferred]; "
        "GPU scale of the TP2 PP2 EP4 case",
    ),
    GraphCase(
        label="DeepSeek-V3, 256 GB200, TP1 PP8 VPP4 EP32, MXFP8, DeepEP: graphs",
        source="MLM-DSV3 §4: 610.7 -> 663.3 TFLOP/s (graphs on attn, moe_router, moe_preprocess)",
        **DSV3_GB200,
        measured_speedup=663.3 / 610.7,
        after_tflops=663.3,
        assumed="fp8 for MXFP8; shared experts stay eager (captured in a later row)",
    ),
    GraphCase(
        label="DeepSeek-V3, 256 GB200, same: graphs also capture the shared experts",
        source="MLM-DSV3 §4: 797.7 -> 829.9 TFLOP/s",
        **DSV3_GB200,
        before=PARTIAL,
        after=PARTIAL_SHARED,
        measured_speedup=829.9 / 797.7,
        after_tflops=829.9,
        assumed="fp8 for MXFP8; the PDL and swizzle rows between are GPU-side",
    ),
)


def case_model(slug: str) -> ModelSpec:
    if slug == "gpt-oss-20b":  # not in the catalog (see the case's assumption)
        # the 120b's window, sinks and quick-GeGLU carry over (catalog-facts §1.3, §1.6)
        return replace(
            load_model("gpt-oss-120b"), name="gpt-oss-20b", num_layers=24, num_experts=32
        )
    return load_model(slug)


def case_cluster(case: GraphCase) -> ClusterSpec:
    return load_cluster_preset(case.cluster).spec(case.gpus, case.gpus_per_node)


def case_job(case: GraphCase, kernel: str = "multi_stream") -> TrainingJob:
    """Force-balanced routing, as NVIDIA benchmarks (performance-facts §5.3)."""
    return TrainingJob(
        seq_length=case.seq,
        global_batch_size=case.gbs,
        precision=case.precision,
        moe_imbalance=1.0,
        moe_grouped_gemm_kernel=kernel,  # type: ignore[arg-type]
    )


def case_layout(case: GraphCase, graphs: CudaGraphs = "none") -> Layout:
    return Layout(
        tp=case.tp,
        pp=case.pp,
        vpp=case.vpp,
        ep=case.ep,
        etp=case.etp,
        dp=case.gpus // (case.tp * case.pp),
        micro_batch_size=case.mbs,
        cuda_graphs=graphs,
        moe_dispatcher=case.dispatcher,
    )


@dataclass(frozen=True, slots=True)
class _Runs:
    gpu_mb: float
    moe_block: float
    ep_mb: float
    replay: Any
    """The compute term's replay parts and the recompute seconds (host_term's ``replay``)."""
    measured_mb_s: float | None
    ctx_before: Any
    ctx_after: Any


def _runs(case: GraphCase, profile: PerformanceProfile | None) -> _Runs:
    model = case_model(case.model)
    cluster, job = case_cluster(case), case_job(case)
    prof = profile or load_profile(cluster.gpu)
    dp = case.gpus // (case.tp * case.pp)
    ctxs = []
    for graphs, _ in (case.before, case.after):
        batch = LayoutBatch.from_layouts([case_layout(case, graphs)])
        ctxs.append(step_context(model, cluster, job, batch, prof))
    g = stage_gpu_time(ctxs[1])
    measured = None
    if case.after_tflops:
        per_seq = flops_per_token(model, padded_vocab(model, case.tp), case.seq) * case.seq
        if case.after_ms:  # micro-batches per DP rank from the published tokens per iteration
            flop_iter = case.after_tflops * 1e12 * case.gpus * case.after_ms / 1e3
            m = flop_iter / per_seq / (case.mbs * dp)
            iteration_s = case.after_ms / 1e3
        else:
            m = case.gbs / (case.mbs * dp)
            iteration_s = m * dp * case.mbs * per_seq / (case.after_tflops * 1e12 * case.gpus)
        # 1F1B: m micro-batches plus the (p - 1) / v bubble (megatron-facts §6)
        measured = iteration_s / (m + (case.pp - 1) / case.vpp)
    return _Runs(
        gpu_mb=float(g.gpu_mb[0]),
        moe_block=float(g.compute.replay.moe_block[0]),
        ep_mb=float(g.ep_mb[0]),
        replay=(g.compute.replay, float(g.recompute_mb[0])),
        measured_mb_s=measured,
        ctx_before=ctxs[0],
        ctx_after=ctxs[1],
    )


def _stage_time(runs: _Runs, scale: float, after: bool, shared_captured: bool) -> float:
    ctx = runs.ctx_after if after else runs.ctx_before
    exposed = host_exposed_time(
        ctx,
        np.array([scale * runs.gpu_mb]),
        moe_block_fwd=np.array([scale * runs.moe_block]),
        ep_mb=np.array([scale * runs.ep_mb]),
        capture_shared_experts=shared_captured,
        replay=(runs.replay[0], np.array([scale * runs.replay[1]])),
    )
    return scale * runs.gpu_mb + float(exposed[0])


def gpu_scale(case: GraphCase, runs: _Runs) -> float:
    """The factor on the planner's GPU time that makes the 'after' run take its measured time."""
    assert runs.measured_mb_s is not None
    lo, hi = 1e-3, 1e2
    for _ in range(60):  # the stage time grows with the GPU time: bisection in log space
        mid = float(np.sqrt(lo * hi))
        t = _stage_time(runs, mid, True, case.after[1])
        lo, hi = (mid, hi) if t < runs.measured_mb_s else (lo, mid)
    return lo


def predict(case: GraphCase, profile: PerformanceProfile | None = None) -> dict[str, Any]:
    """Predicted speed-up of one case, and the GPU scale its anchor needed."""
    runs = _runs(case, profile)
    source = case
    if case.after_tflops is None:
        source = next(c for c in CASES if c.model == case.scale_from and c.after_tflops)
    scale = gpu_scale(source, runs if source is case else _runs(source, profile))
    before = _stage_time(runs, scale, False, case.before[1])
    after = _stage_time(runs, scale, True, case.after[1])
    return {"speedup": before / after, "gpu_scale": scale, "after_mb_ms": after * 1e3}


HOST_KERNEL_SWEEP_S = (2.5e-6, 5e-6, 7.5e-6, 10e-6, 15e-6, 20e-6)


def host_rows() -> list[dict[str, Any]]:
    """Every case: measured vs predicted speed-up, and its sensitivity to the host cost per
    kernel (the one unsourced number, models_db/host_costs.json)."""
    rows = []
    for case in CASES:
        pred = predict(case)
        base = load_profile(case_cluster(case).gpu)
        sweep = {
            f"{h * 1e6:g}": round(
                predict(case, base.with_coefficients(host_kernel_s=h))["speedup"], 3
            )
            for h in HOST_KERNEL_SWEEP_S
        }
        gain_pred, gain_meas = pred["speedup"] - 1.0, case.measured_speedup - 1.0
        implied = implied_host_kernel_s(case)
        rows.append(
            {
                "case": case.label,
                "source": case.source,
                "measured_speedup": round(case.measured_speedup, 3),
                "predicted_speedup": round(pred["speedup"], 3),
                "gain_error": round(gain_pred / gain_meas - 1.0, 2),
                "same_sign": bool(np.sign(gain_pred) == np.sign(gain_meas)),
                "gpu_scale": round(pred["gpu_scale"], 3),
                "after_mb_ms": round(pred["after_mb_ms"], 2),
                "by_host_us_per_kernel": sweep,
                "implied_host_us_per_kernel": None if implied is None else round(implied * 1e6, 1),
                "assumed": case.assumed,
            }
        )
    return rows


def implied_host_kernel_s(case: GraphCase, hi: float = 200e-6) -> float | None:
    """The host seconds per kernel at which the predicted speed-up equals the published one
    (None where no value up to ``hi`` reaches it)."""
    base = load_profile(case_cluster(case).gpu)

    def gap(h: float) -> float:
        pred = predict(case, base.with_coefficients(host_kernel_s=h))["speedup"]
        return pred - case.measured_speedup

    grid = np.geomspace(1e-6, hi, 25)
    gaps = [gap(float(h)) for h in grid]
    for i in range(len(grid) - 1):
        if np.sign(gaps[i]) != np.sign(gaps[i + 1]):
            lo, up = float(grid[i]), float(grid[i + 1])
            for _ in range(30):
                mid = (lo + up) / 2
                lo, up = (mid, up) if np.sign(gap(mid)) == np.sign(gaps[i]) else (lo, mid)
            return lo
    return None


def kernel_path_rows() -> list[dict[str, Any]]:
    """Step-level effect of ``moe_grouped_gemm_kernel`` (mechanisms-facts §4.1-4.2) on the
    layouts of the CUDA-graph cases, eager: the full planner (GPU and host terms), per path."""
    rows = []
    for case in CASES:
        if case.before != EAGER:
            continue
        model, cluster = case_model(case.model), case_cluster(case)
        batch = LayoutBatch.from_layouts([case_layout(case)])
        steps = {}
        for path in ("multi_stream", "grouped"):
            est = estimate_performance(
                model, cluster, case_job(case, path), batch, load_profile(cluster.gpu)
            )
            steps[path] = float(est.step_time_s[0])
        local = (model.num_experts or 1) // case.ep
        # tokens / tp per rank with SP, gathered over the expert-TP group (expert_parallel)
        routed = case.seq * case.mbs * model.moe_router_topk * case.ep * case.etp
        rows_per_expert = routed // (case.tp * (model.num_experts or 1))
        rows.append(
            {
                "case": case.label.split(", graphs")[0].split(": graphs")[0],
                "local_experts": local,
                "rows_per_expert": rows_per_expert,
                "multi_stream_s": round(steps["multi_stream"], 3),
                "grouped_s": round(steps["grouped"], 3),
                "grouped_speedup": round(steps["multi_stream"] / steps["grouped"], 3),
            }
        )
    return rows
