"""Measure the kernel rates the throughput model's priors stand for, on a real GPU.

Run on a machine with an NVIDIA GPU and PyTorch (not needed by CI or the tests)::

    python -m bench.gpu_kernels --out bench/results/gpu_kernels.json

It times (CUDA events, median of repeats after warm-up, fresh random data):
  * bf16 and fp8 (e4m3, per-tensor scale, torch._scaled_mm) GEMMs of the per-GPU tensor-parallel
    shapes of Llama-3.1 8B/70B/405B (QKV, attention projection, FC1, FC2) at t = 1..8 and
    m = 1k..16k tokens; forward (m x k . k x n), data-gradient and weight-gradient passes;
  * Mixtral-8x7B expert GEMMs (h = 4096, F = 14336, SwiGLU) at 64..16k tokens per expert;
  * causal SDPA (flash backend) forward + backward at 2k..32k sequence, GQA 32/8 heads of 128;
  * HBM bandwidth: a 4 GiB device-to-device copy (bytes read + written).

FLOPs are counted as the planner counts them (megatron-facts §5: 2 per multiply-add, causal
attention halved: fwd 2 s^2 a d per sequence, fwd+bwd 3x that).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

MODELS = {  # name: (hidden, ffn, heads, query groups, head dim): catalog-facts / HF configs
    "llama3.1-8b": (4096, 14336, 32, 8, 128),
    "llama3.1-70b": (8192, 28672, 64, 8, 128),
    "llama3.1-405b": (16384, 53248, 128, 8, 128),
}


def _timer(torch: Any, fn: Any, target_s: float = 0.03) -> float:
    """Median seconds of fn() (CUDA events), repeats chosen so the total is about target_s."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    one = start.elapsed_time(end) / 1e3
    reps = int(min(max(target_s / max(one, 1e-6), 3), 50))
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def _gemm(torch: Any, m: int, n: int, k: int, fp8: bool) -> float:
    """Seconds of C[m, n] = A[m, k] . B[k, n] (bf16, or e4m3 with per-tensor scales)."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if not fp8:
        return _timer(torch, lambda: a @ w.t())
    a8 = a.to(torch.float8_e4m3fn)
    w8 = w.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda", dtype=torch.float32)
    return _timer(
        torch,
        lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
    )


def _copy_rate(torch: Any) -> float:
    """Bytes read + written per second of a 4 GiB device-to-device copy."""
    src = torch.empty(2**31, device="cuda", dtype=torch.int16)
    dst = torch.empty_like(src)
    sec = _timer(torch, lambda: dst.copy_(src), 0.05)
    return float(2 * src.numel() * 2 / sec)


def _attention(torch: Any, heads: int, groups: int, s: int) -> dict[str, Any]:
    """Causal SDPA (GQA, head dim 128) forward and forward+backward rates."""
    import torch.nn.functional as F

    b = max(1, 16384 // s)
    q = torch.randn(b, heads, s, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    kk = torch.randn(b, groups, s, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, groups, s, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dout = torch.randn_like(q)

    def fwd() -> Any:
        return F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=True)

    def fwd_bwd() -> None:
        torch.autograd.backward(fwd(), dout)

    flop_fwd = 2.0 * b * s * s * heads * 128  # megatron-facts §5.4, causal halved
    with torch.no_grad():
        t_f = _timer(torch, fwd)
    t_fb = _timer(torch, fwd_bwd)
    return {
        "heads": heads,
        "groups": groups,
        "seq": s,
        "batch": b,
        "head_dim": 128,
        "fwd_flop_per_s": flop_fwd / t_f,
        "fwd_bwd_flop_per_s": 3 * flop_fwd / t_fb,
    }


def layer_gemms(h: int, f: int, a: int, g: int, d: int, t: int) -> dict[str, tuple[int, int]]:
    """Per-GPU (n, k) of the four GEMMs of one layer at tensor parallelism t."""
    return {
        "qkv": ((a + 2 * g) * d // t, h),
        "proj": (h, a * d // t),
        "fc1": (2 * f // t, h),
        "fc2": (h, f // t),
    }


def measure(quick: bool) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    out: dict[str, Any] = {
        "device": props.name,
        "sm_count": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%d"),
        "gemm": [],
        "expert_gemm": [],
        "attention": [],
    }
    # HBM: 4 GiB copy, bytes read + written
    out["hbm_copy_bytes_per_s"] = _copy_rate(torch)
    # bf16 plateau reference: 8192^3
    out["gemm_8192_bf16_flop_per_s"] = 2 * 8192**3 / _gemm(torch, 8192, 8192, 8192, False)
    out["gemm_8192_fp8_flop_per_s"] = 2 * 8192**3 / _gemm(torch, 8192, 8192, 8192, True)
    ms = (1024, 4096, 16384) if quick else (1024, 2048, 4096, 8192, 16384)
    for name, (h, f, a, g, d) in MODELS.items():
        for t in (1, 2, 4, 8):
            if name == "llama3.1-405b" and t < 4:
                continue
            for gname, (n, k) in layer_gemms(h, f, a, g, d, t).items():
                for m in ms:
                    for fp8 in (False, True):
                        row: dict[str, Any] = {
                            "model": name,
                            "tp": t,
                            "gemm": gname,
                            "m": m,
                            "n": n,
                            "k": k,
                            "dtype": "fp8" if fp8 else "bf16",
                        }
                        flop = 2.0 * m * n * k
                        row["fwd_flop_per_s"] = flop / _gemm(torch, m, n, k, fp8)
                        if not fp8:  # dgrad: [m,n].[n,k]; wgrad: [k,m].[m,n]
                            row["dgrad_flop_per_s"] = flop / _gemm(torch, m, k, n, fp8)
                            row["wgrad_flop_per_s"] = flop / _gemm(torch, k, n, m, fp8)
                        out["gemm"].append(row)
    # Mixtral-8x7B experts: FC1 (n = 2F, k = h) and FC2 (n = h, k = F) at tokens per expert
    h, f = 4096, 14336
    for tpe in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384):
        for gname, (n, k) in {"fc1": (2 * f, h), "fc2": (h, f)}.items():
            for fp8 in (False, True):
                flop = 2.0 * tpe * n * k
                out["expert_gemm"].append(
                    {
                        "model": "mixtral-8x7b",
                        "gemm": gname,
                        "m": tpe,
                        "n": n,
                        "k": k,
                        "dtype": "fp8" if fp8 else "bf16",
                        "fwd_flop_per_s": flop / _gemm(torch, tpe, n, k, fp8),
                    }
                )
    # attention: causal SDPA (flash), GQA, fwd and fwd+bwd
    for heads, groups in ((32, 8), (8, 2)):  # tp = 1 and tp = 4 of Llama-8B
        for s in (2048, 4096, 8192, 16384, 32768):
            out["attention"].append(_attention(torch, heads, groups, s))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="gpu_kernels.json")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    t0 = time.time()
    res = measure(args.quick)
    res["wall_s"] = time.time() - t0
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(res["device"], "hbm", res["hbm_copy_bytes_per_s"] / 1e12, "TB/s")
    print(
        "8192^3 bf16",
        res["gemm_8192_bf16_flop_per_s"] / 1e12,
        "fp8",
        res["gemm_8192_fp8_flop_per_s"] / 1e12,
    )
    for r in res["attention"]:
        print(
            "attn",
            r["heads"],
            r["seq"],
            round(r["fwd_flop_per_s"] / 1e12),
            round(r["fwd_bwd_flop_per_s"] / 1e12),
        )
    print("wall", res["wall_s"])


if __name__ == "__main__":
    main()
