"""Prediction intervals by regime and extrapolation warnings (issue 12 item 9)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.calibration.intervals import (
    TRANSFERRED,
    IntervalTable,
    fallback_keys,
    regime_parts,
    uncertainty,
)
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import DEEPSEEK_V3, H100, LLAMA_8B, LLAMA_70B

CALIBRATED: dict[str, Any] = {
    "gpus": ["h100-sxm-80gb"],
    "parameters": [1e9, 500e9],
    "seq_length": [2048, 8192],
    "num_gpus": [8, 1024],
    "max_experts": 8,
    "max_topk": 2,
    "min_expert_ffn_ratio": 2.0,
    "max_cp": 2,
    "cp_across_nodes": False,
}


def table(**bands: dict[str, float]) -> IntervalTable:
    return IntervalTable.from_dict(
        {
            "low_quantile": 0.1,
            "high_quantile": 0.9,
            "min_rows": 10,
            "bands": {"all": {"n": 100, "low": 0.8, "high": 1.2}, **bands},
            "calibrated": CALIBRATED,
        }
    )


FITTED = default_profile(H100).with_coefficients(provenance={"kind": "fitted"})


def test_a_regime_with_few_rows_falls_back_to_its_parent() -> None:
    parts = ["dense", "multi-node", "cp=1", "bf16"]
    assert fallback_keys(parts)[0] == "dense/multi-node/cp=1/bf16"
    assert fallback_keys(parts)[-1] == "all"
    t = table(
        **{
            "dense/multi-node/cp=1/bf16": {"n": 4, "low": 0.99, "high": 1.01},
            "dense/multi-node": {"n": 40, "low": 0.9, "high": 1.1},
        }
    )
    key, band = t.band(parts)
    assert key == "dense/multi-node" and (band.low, band.high) == (0.9, 1.1)
    key, _ = t.band(["moe", "single-node", "cp=1", "fp8"])
    assert key == "all"


def test_a_transferred_profile_takes_the_leave_one_gpu_out_band() -> None:
    t = table(**{TRANSFERRED: {"n": 100, "low": 0.7, "high": 1.3}})
    assert t.band(["dense"], transferred=True)[0] == TRANSFERRED
    assert t.band(["dense"], transferred=False)[0] == "all"


def test_the_interval_brackets_the_prediction_and_step_time_inverts_it() -> None:
    cl = ClusterSpec(name="c", gpu=H100, num_gpus=64)
    job = TrainingJob(seq_length=4096, global_batch_size=256)
    out = uncertainty(
        table(),
        LLAMA_70B,
        cl,
        job,
        Layout(tp=4, pp=2, dp=8),
        FITTED,
        tokens_per_s_per_gpu=1000.0,
        step_time_s=10.0,
    )
    assert out["tokens_per_s_per_gpu_interval"] == pytest.approx([800.0, 1200.0])
    assert out["step_time_interval_s"] == pytest.approx([10 / 1.2, 10 / 0.8])
    assert out["extrapolation"] == []
    assert "split-conformal" in out["interval"]["band"]  # a band without df: the earlier rule


def test_a_model_band_says_so_and_keeps_its_bounds() -> None:
    """A band from the noise model (it records its df) is named as such in the response."""
    model: dict[str, float] = {"n": 100, "low": 0.9, "high": 1.1, "log_sd": 0.06, "df": 3}
    out = uncertainty(
        table(all=model),
        LLAMA_70B,
        ClusterSpec(name="c", gpu=H100, num_gpus=64),
        TrainingJob(seq_length=4096, global_batch_size=256),
        Layout(tp=4, pp=2, dp=8),
        FITTED,
        tokens_per_s_per_gpu=1000.0,
        step_time_s=10.0,
    )
    assert out["tokens_per_s_per_gpu_interval"] == pytest.approx([900.0, 1100.0])
    assert "predictive band of the campaign noise model" in out["interval"]["band"]
    assert "3 degrees of freedom" in out["interval"]["band"]


def test_extrapolation_names_each_reason() -> None:
    cl = ClusterSpec(name="c", gpu=H100, num_gpus=2048, gpus_per_node=8)
    job = TrainingJob(seq_length=32768, global_batch_size=2048)
    lay = Layout(tp=8, pp=8, cp=4, ep=8, dp=8)
    out = uncertainty(
        table(),
        DEEPSEEK_V3,
        cl,
        job,
        lay,
        default_profile(H100),
        tokens_per_s_per_gpu=500.0,
        step_time_s=20.0,
    )
    text = " | ".join(out["extrapolation"])
    assert "not fitted to measurements" in text
    assert "fine-grained MoE" in text
    assert "cp=4 is above" in text
    assert "context parallelism across nodes" in text
    assert "sequence length 32768" in text
    assert "GPU count 2048" in text
    assert "model size" in text


def test_regime_parts_read_the_layout_and_job() -> None:
    one_node = ClusterSpec(name="c", gpu=H100, num_gpus=8)
    fp8 = TrainingJob(seq_length=4096, global_batch_size=8, precision="fp8")
    assert regime_parts(LLAMA_8B, one_node, fp8, 2) == ["dense", "single-node", "cp>1", "fp8"]
