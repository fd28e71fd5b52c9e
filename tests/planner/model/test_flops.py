"""Model FLOPs against Megatron's own ``num_floating_point_operations`` (megatron-facts §8)."""

from __future__ import annotations

import pytest

from planner.layouts import LayoutBatch
from planner.model.flops import flops_per_iteration, flops_per_token
from planner.specs import TrainingJob
from tests.planner.fixtures import DEEPSEEK_V3, LLAMA_8B, MIXTRAL_8X7B

TP2 = LayoutBatch.from_columns(tp=[2])


def test_vector_a_per_token_matches_hand_check() -> None:
    """megatron-facts §8: MLP + attention projections + logits + core attention."""
    expected = 33_822_867_456 + 8_053_063_680 + 3_152_019_456 + 6_442_450_944
    assert flops_per_token(LLAMA_8B, 128256, 8192) == expected


def test_vector_a_per_batch() -> None:
    job = TrainingJob(seq_length=8192, global_batch_size=128)
    assert flops_per_iteration(LLAMA_8B, job, TP2)[0] == pytest.approx(5.397063e16, rel=1e-6)


def test_vector_d_mixtral_per_batch() -> None:
    job = TrainingJob(seq_length=4096, global_batch_size=256)
    assert flops_per_iteration(MIXTRAL_8X7B, job, TP2)[0] == pytest.approx(8.357828e16, rel=1e-6)


def test_vector_e_deepseek_per_batch() -> None:
    job = TrainingJob(seq_length=4096, global_batch_size=1024)
    assert flops_per_iteration(DEEPSEEK_V3, job, TP2)[0] == pytest.approx(1.090489e18, rel=1e-6)


def test_vector_e_deepseek_per_token() -> None:
    assert flops_per_token(DEEPSEEK_V3, 129280, 4096) == pytest.approx(2.599930e11, rel=1e-6)


def test_only_the_padded_vocab_depends_on_tp() -> None:
    """128256 pads to 129024 at tp=8 (megatron-facts §3.4): only the logits term grows."""
    job = TrainingJob(seq_length=8192, global_batch_size=128)
    flops = flops_per_iteration(LLAMA_8B, job, LayoutBatch.from_columns(tp=[1, 2, 8]))
    assert flops[0] == flops[1]
    assert flops[2] - flops[0] == pytest.approx(128 * 8192 * 6 * 4096 * (129024 - 128256))
