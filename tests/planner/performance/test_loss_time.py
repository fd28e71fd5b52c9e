"""The loss on the last stage by the job's cross-entropy kernel (issue 12 item 7)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models_db.catalog import load_gpu
from planner import ClusterSpec, LayoutBatch, TrainingJob
from planner.performance.compute import loss_time
from planner.performance.context import step_context
from planner.performance.cross_entropy import cross_entropy_time
from planner.performance.step_time import default_profile
from tests.planner.fixtures import LLAMA_8B

GPU = load_gpu("h100-sxm-80gb")
CLUSTER = ClusterSpec(name="h", gpu=GPU, num_gpus=8, gpus_per_node=8)
JOB = TrainingJob(seq_length=8192, global_batch_size=64)
BATCH = LayoutBatch.from_columns(tp=[1, 8], dp=[8, 1])


def _loss(impl: str) -> np.ndarray:
    job = replace(JOB, cross_entropy_fusion=impl, megatron_core_version="0.18")  # te: <= 0.18
    return loss_time(step_context(LLAMA_8B, CLUSTER, job, BATCH, default_profile(GPU)))


def test_fused_kernels_move_fewer_bytes() -> None:
    te, native, unfused = _loss("te"), _loss("native"), _loss("unfused")
    assert np.all(te < native) and np.all(native < unfused)
    # tp 1: HBM passes only, (38 + 14) / (10 + 6) bytes per logit
    assert unfused[0] / native[0] == pytest.approx(52.0 / 16.0)


def test_tp_adds_the_row_collectives() -> None:
    ctx = step_context(LLAMA_8B, CLUSTER, JOB, BATCH, default_profile(GPU))
    hbm_only = cross_entropy_time(
        "native",
        tokens=ctx.tokens,
        vocab_padded=ctx.vocab,
        tp=ctx.tp,
        hbm_bytes_per_s=ctx.hbm_bytes_per_s,
    ).total_s
    loss = loss_time(ctx)
    assert loss[0] == hbm_only[0]
    assert loss[1] > hbm_only[1]  # two all-reduces of T fp32 values over 8 ranks
