"""Fitting and cross-validation of the throughput model (planner.calibration.fit)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.calibration.fit import (
    ErrorStats,
    cross_validate,
    fit_profile,
    predict_tokens_per_s,
    usable,
)
from planner.calibration.measurements import Measurement
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, LLAMA_70B

MODELS = [LLAMA_8B, LLAMA_70B]
LAYOUTS = [
    Layout(tp=1, pp=1, dp=64),
    Layout(tp=2, pp=1, dp=32),
    Layout(tp=4, pp=2, dp=8),
    Layout(tp=8, pp=1, dp=8),
    Layout(tp=2, pp=4, vpp=2, dp=8),
]


def synthetic(truth, source: str, model: ModelSpec, scale: float = 1.0) -> list[Measurement]:
    """Measurements whose tokens/s are the model's own predictions under ``truth``."""
    cl = ClusterSpec(name="c", gpu=H100, num_gpus=64)
    job = TrainingJob(seq_length=4096, global_batch_size=256)
    rows = [
        Measurement(
            row_id=f"{source}-{i}",
            source_id=source,
            sweep_id=f"{source}-sweep",
            reliability="high",
            model=model,
            cluster=cl,
            job=job,
            layout=lay,
            tokens_per_s_per_gpu=None,
            step_time_s=None,
            mfu=None,
        )
        for i, lay in enumerate(LAYOUTS)
    ]
    pred = predict_tokens_per_s(rows, truth)
    return [
        replace(r, tokens_per_s_per_gpu=float(p) * scale) for r, p in zip(rows, pred, strict=True)
    ]


def test_fit_recovers_known_coefficients() -> None:
    base = default_profile(H100)
    truth = base.with_coefficients(gemm_efficiency=0.62, tp_overlap=0.2)
    rows = synthetic(truth, "a", MODELS[0]) + synthetic(truth, "b", MODELS[1])
    fitted, report = fit_profile(
        rows, base, coefficients=("gemm_efficiency", "tp_overlap"), prior_weight=1e-4
    )
    assert fitted.gemm_efficiency == pytest.approx(0.62, abs=0.01)
    assert fitted.tp_overlap == pytest.approx(0.2, abs=0.05)
    assert report.after.median_ape < 0.005 < report.before.median_ape
    assert fitted.provenance["n_rows"] == len(rows)


def test_fit_leaves_unlisted_coefficients_alone() -> None:
    base = default_profile(H100)
    rows = synthetic(base.with_coefficients(gemm_efficiency=0.6), "a", MODELS[0])
    fitted, _ = fit_profile(rows, base, coefficients=("gemm_efficiency",))
    assert fitted.dp_overlap == base.dp_overlap
    assert fitted.nvlink_efficiency == base.nvlink_efficiency


def test_cross_validation_never_fits_on_the_held_out_group() -> None:
    base = default_profile(H100)
    truth = base.with_coefficients(gemm_efficiency=0.65)
    rows = (
        synthetic(truth, "a", MODELS[0])
        + synthetic(truth, "b", MODELS[1])
        + synthetic(truth, "shifted", MODELS[0], scale=0.5)
    )
    cv = cross_validate(
        rows,
        lambda gpu: base,
        group_by="source",
        coefficients=("gemm_efficiency",),
    )
    # the shifted group is predicted from a and b only: about 2x its (halved) measurement
    assert cv.per_group["shifted"]["median_ape"] > 0.8
    assert cv.n_rows == 15


def test_cross_validation_by_sweep_reports_rankings() -> None:
    base = default_profile(H100)
    rows = synthetic(base, "a", MODELS[0]) + synthetic(base, "b", MODELS[1])
    cv = cross_validate(rows, lambda gpu: base, group_by="sweep", coefficients=())
    assert cv.after.median_ape == pytest.approx(0.0, abs=1e-9)
    assert {s.sweep_id for s in cv.sweeps} == {"a-sweep", "b-sweep"}
    assert all(s.top1 and s.top3 and s.spearman == pytest.approx(1.0) for s in cv.sweeps)


def test_low_reliability_rows_are_not_used() -> None:
    base = default_profile(H100)
    rows = synthetic(base, "a", MODELS[0])
    rows[0] = replace(rows[0], reliability="low")
    assert len(usable(rows)) == len(rows) - 1


def test_error_stats_are_absolute_percentages() -> None:
    stats = ErrorStats.of(np.array([110.0, 90.0, 100.0]), np.array([100.0, 100.0, 100.0]))
    assert stats.median_ape == pytest.approx(0.1)
    assert stats.n == 3


H200 = replace(H100, name="h200-sxm-141gb", hbm_bandwidth_bytes_per_s=4.8e12)
B200 = replace(
    H100,
    name="b200-sxm-180gb",
    architecture="blackwell",
    peak_bf16_flop_per_s=2250e12,
    peak_fp8_flop_per_s=4500e12,
)


def _on(gpu: GPUSpec, rows: list[Measurement]) -> list[Measurement]:
    return [
        replace(r, row_id=f"{gpu.name}-{r.row_id}", cluster=replace(r.cluster, gpu=gpu))
        for r in rows
    ]


def test_leave_one_gpu_out_transfers_the_software_fit_but_not_chip_efficiency() -> None:
    # H100 rows run with a slow host (layer overhead, a software coefficient) and an unusual
    # GEMM plateau (a chip coefficient); the held-out B200 must inherit only the former
    truth = default_profile(H100).with_coefficients(layer_overhead_s=400e-6, gemm_efficiency=0.5)
    h100 = synthetic(truth, "a", MODELS[0]) + synthetic(truth, "b", MODELS[1])
    b200_truth = default_profile(B200).with_coefficients(layer_overhead_s=400e-6)
    b200 = _on(B200, synthetic(b200_truth, "c", MODELS[0]))
    b200 = [
        replace(r, tokens_per_s_per_gpu=float(p))
        for r, p in zip(b200, predict_tokens_per_s(b200, b200_truth), strict=True)
    ]
    cv = cross_validate(
        h100 + b200,
        default_profile,
        group_by="gpu",
        coefficients=("layer_overhead_s", "gemm_efficiency"),
        noise=1e-3,  # exact synthetic rows: a weak prior lets them move 8 widths
        shared_noise=0.0,  # and no campaign error for them to share
    )
    held = cv.per_group["b200-sxm-180gb"]
    assert held["median_ape"] < 0.02 < held["median_ape_before"]


def test_leave_one_family_out_groups_by_model_family() -> None:
    base = default_profile(H100)
    llama = replace(MODELS[0], name="Llama 3.1 8b")
    gpt = replace(MODELS[1], name="GPT-3 175B")
    rows = synthetic(base, "a", llama) + synthetic(base, "b", gpt)
    cv = cross_validate(rows, default_profile, group_by="family", coefficients=())
    assert set(cv.per_group) == {"llama", "gpt"}
