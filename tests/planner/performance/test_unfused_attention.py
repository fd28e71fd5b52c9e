"""The unfused attention's score-matrix traffic (planner.performance.unfused_attention), with
hand numbers from megatron-facts §7.1 and the Narayanan 2021 GPT-1.7B layer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models_db.catalog import load_gpu
from planner.layouts import LayoutBatch
from planner.performance.step_time import default_profile, estimate_performance
from planner.performance.unfused_attention import score_bytes, unfused_score_seconds
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob

A100 = load_gpu("a100-sxm4-80gb")  # 2.039 TB/s HBM (catalog)
GPT_1_7B = ModelSpec(  # Narayanan 2021 Table 1, first row
    name="gpt-1.7b",
    num_layers=24,
    hidden_size=2304,
    ffn_hidden_size=9216,
    num_attention_heads=24,
    vocab_size=51200,
    swiglu=False,
    normalization="LayerNorm",
    position_embedding_type="learned_absolute",
    attention_dropout=0.1,
)
JOB = TrainingJob(seq_length=2048, global_batch_size=16, attention_backend="unfused")


def test_bytes_per_score_count_the_tensors_of_korthikanti_section_4() -> None:
    # softmax path: fwd 2 + 4 + 2, bwd 2 + 2 + 6 + 4; dropout adds 5 each way (mask 1 B)
    assert score_bytes(attention_dropout=False) == 22.0
    assert score_bytes(attention_dropout=True) == 32.0


def test_gpt_1_7b_layer_by_hand() -> None:
    # 24 heads x 2048 keys x 16 x 2048 tokens x 32 B = 5.154e10 B at 0.8 x 2.039 TB/s
    t = unfused_score_seconds(
        heads_per_gpu=24, seq_len=2048, tokens=16 * 2048, hbm_bytes_per_s=0.8 * 2.039e12,
        attention_dropout=True,
    )  # fmt: skip
    assert float(t) == pytest.approx(5.154e10 / 1.6312e12, rel=1e-3)  # 31.6 ms per layer


def test_step_time_charges_it_per_layer_and_only_when_unfused() -> None:
    cluster = ClusterSpec(name="c", gpu=A100, num_gpus=1, gpus_per_node=8)
    layout = LayoutBatch.from_layouts([Layout(tp=1, pp=1, dp=1, micro_batch_size=16)])
    profile = default_profile(A100)

    def compute(job: TrainingJob) -> float:
        est = estimate_performance(GPT_1_7B, cluster, job, layout, profile)
        return float(est.breakdown["compute_s"][0])

    extra = compute(JOB) - compute(replace(JOB, attention_backend="flash"))
    assert extra == pytest.approx(24 * 5.154e10 / (0.8 * 2.039e12), rel=1e-3)  # 0.76 s


def test_its_share_shrinks_with_hidden_size_and_tp() -> None:
    # a x s / t per token against 24 h^2 / t GEMM FLOPs: 1.7B at t=1 vs 145.6B at t=8
    def ratio(h: int, heads: int, tp: int) -> float:
        scores = heads / tp * 2048
        flops = 24 * h * h / tp
        return scores / flops

    assert ratio(2304, 24, 1) > 6 * ratio(12288, 96, 8)


def test_the_profile_correction_adds_bytes() -> None:
    base = dict(heads_per_gpu=8, seq_len=2048, tokens=4096, hbm_bytes_per_s=1e12)
    plain = unfused_score_seconds(**base, attention_dropout=False)  # type: ignore[arg-type]
    more = unfused_score_seconds(
        **base,
        attention_dropout=False,
        extra_bytes_per_score=11.0,  # type: ignore[arg-type]
    )
    assert float(more) == pytest.approx(float(plain) * 33 / 22)


def test_full_recompute_replays_the_forward_share_13_of_32() -> None:
    cluster = ClusterSpec(name="c", gpu=A100, num_gpus=1, gpus_per_node=8)
    layout = LayoutBatch.from_layouts(
        [Layout(tp=1, pp=1, dp=1, micro_batch_size=16, recompute="full")]
    )
    profile = default_profile(A100)

    def recompute(job: TrainingJob) -> float:
        est = estimate_performance(GPT_1_7B, cluster, job, layout, profile)
        return float(est.breakdown["recompute_s"][0])

    extra = recompute(JOB) - recompute(replace(JOB, attention_backend="flash"))
    # forward: scores 2 + softmax 4 + dropout 5 + PV read 2 = 13 B per score, 24 layers
    assert extra == pytest.approx(24 * 13 / 32 * 5.154e10 / (0.8 * 2.039e12), rel=1e-3)
