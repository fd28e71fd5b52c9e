"""Specs shared by the planner tests (datasheet values as in models_db, fixed here so that the
tests do not depend on the catalog)."""

from __future__ import annotations

from planner.specs import GPUSpec

H100 = GPUSpec(
    name="h100-sxm-80gb",
    hbm_bytes=80 * 2**30,
    hbm_bandwidth_bytes_per_s=3.35e12,
    peak_bf16_flop_per_s=989.4e12,
    peak_fp8_flop_per_s=1978.9e12,
    intra_node_bandwidth_bytes_per_s=450e9,
    architecture="hopper",
)
