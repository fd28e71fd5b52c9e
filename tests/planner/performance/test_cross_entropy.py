"""Cross-entropy passes on the last stage (mechanisms-facts §5)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.performance.cross_entropy import (
    CROSS_ENTROPY_IMPLS,
    cross_entropy_passes,
    cross_entropy_time,
    logits_per_rank,
    row_collective_bytes,
)
from planner.specs import SpecError


def test_sheet_memory_example() -> None:
    """§5.5: s = 8192, b = 1, V = 128256, t = 1: 1.05e9 logits, 4.2 GB held, ~6.3 GB peak."""
    r = cross_entropy_time(
        "unfused", tokens=8192, vocab_padded=128256, tp=1, hbm_bytes_per_s=2.7e12
    )
    assert float(logits_per_rank(8192, 128256, 1)) == pytest.approx(1.05e9, rel=0.01)
    assert float(r.held_bytes) == pytest.approx(4.2e9, rel=0.01)
    assert float(r.peak_bytes) == pytest.approx(6.3e9, rel=0.01)


def test_unfused_traffic_is_the_sheets_38_and_14_bytes() -> None:
    p = cross_entropy_passes("unfused")
    assert (p.fwd_bytes_per_logit, p.bwd_bytes_per_logit, p.tp_all_reduces) == (38.0, 14.0, 3)
    assert cross_entropy_passes("native").tp_all_reduces == 2


def test_fusion_orders_the_time_and_te_holds_half() -> None:
    times = {
        impl: float(
            cross_entropy_time(
                impl, tokens=8192, vocab_padded=128256, tp=1, hbm_bytes_per_s=2.7e12
            ).total_s
        )
        for impl in CROSS_ENTROPY_IMPLS
    }
    assert times["unfused"] > times["native"] > times["te_fp32_grad"] > times["te"]
    assert times["unfused"] / times["te"] == pytest.approx(52 / 10)
    te = cross_entropy_time("te", tokens=8192, vocab_padded=128256, tp=1, hbm_bytes_per_s=1.0)
    assert float(te.held_bytes) == pytest.approx(2 * 8192 * 128256)


def test_tp_splits_the_vocabulary_and_adds_row_collectives() -> None:
    one = cross_entropy_time(
        "unfused",
        tokens=np.array([4096.0, 4096.0]),
        vocab_padded=128256,
        tp=np.array([1.0, 8.0]),
        hbm_bytes_per_s=2.7e12,
        collective_s=20e-6,
    )
    assert one.bwd_s[1] == pytest.approx(one.bwd_s[0] / 8)
    assert one.fwd_s[1] == pytest.approx(one.fwd_s[0] / 8 + 3 * 20e-6)
    assert float(row_collective_bytes("te", 4096)) == 4096 * 12


def test_unknown_implementation_names_the_field() -> None:
    with pytest.raises(SpecError, match="cross_entropy_fusion"):
        cross_entropy_passes("liger")
