"""Invariants of the memory estimator, checked with hypothesis, and its speed."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.layouts import (
    RECOMPUTE_FULL,
    RECOMPUTE_NONE,
    RECOMPUTE_SELECTIVE,
    SHARD_FULL,
    SHARD_NONE,
    SHARD_OPTIMIZER,
    LayoutBatch,
)
from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.specs import ClusterSpec, ModelSpec, TrainingJob
from tests.planner.fixtures import SMALL_DENSE, SMALL_GPU, SMALL_MOE
from tests.support.vectorised import assert_calls_do_not_grow

MODEL, MOE, GPU = SMALL_DENSE, SMALL_MOE, SMALL_GPU
CLUSTER = ClusterSpec(name="test", gpu=GPU, num_gpus=64)
JOB = TrainingJob(seq_length=4096, global_batch_size=512)

models = st.sampled_from([MODEL, MOE])
layouts = st.fixed_dictionaries(
    {
        "tp": st.sampled_from([1, 2, 4]),
        "pp": st.sampled_from([1, 2, 4]),
        "vpp": st.sampled_from([1, 2]),
        "cp": st.sampled_from([1, 2]),
        "dp": st.sampled_from([1, 2, 8]),
        "micro_batch_size": st.sampled_from([1, 2, 4]),
        "recompute": st.sampled_from([RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL]),
        "optimizer_sharding": st.sampled_from([SHARD_NONE, SHARD_OPTIMIZER, SHARD_FULL]),
    }
)


def batch_of(rows: list[dict[str, int]]) -> LayoutBatch:
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    return LayoutBatch.from_columns(**columns)


@settings(max_examples=60, deadline=None)
@given(model=models, layout=layouts)
def test_memory_never_decreases_with_micro_batch_size(
    model: ModelSpec, layout: dict[str, int]
) -> None:
    rows = [{**layout, "micro_batch_size": b} for b in (1, 2, 4, 8)]
    total = estimate_memory(model, CLUSTER, JOB, batch_of(rows)).total_bytes
    assert np.all(np.diff(total) >= 0)


@settings(max_examples=60, deadline=None)
@given(model=models, layout=layouts)
def test_weights_never_increase_with_tp(model: ModelSpec, layout: dict[str, int]) -> None:
    rows = [{**layout, "tp": t} for t in (1, 2, 4, 8)]
    est = estimate_memory(model, CLUSTER, JOB, batch_of(rows))
    for terms in (est.first_stage_terms, est.last_stage_terms):
        assert np.all(np.diff(terms["weights_bytes"]) <= 0)


@settings(max_examples=60, deadline=None)
@given(model=models, layout=layouts)
def test_weights_never_increase_with_pp(model: ModelSpec, layout: dict[str, int]) -> None:
    rows = [{**layout, "pp": p, "vpp": 1} for p in (1, 2, 4, 8)]
    est = estimate_memory(model, CLUSTER, JOB, batch_of(rows))
    for terms in (est.first_stage_terms, est.last_stage_terms):
        assert np.all(np.diff(terms["weights_bytes"]) <= 0)


@settings(max_examples=60, deadline=None)
@given(model=models, layout=layouts)
def test_full_recompute_le_selective_le_none(model: ModelSpec, layout: dict[str, int]) -> None:
    modes = (RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, RECOMPUTE_NONE)
    rows = [{**layout, "recompute": r} for r in modes]
    est = estimate_memory(model, CLUSTER, JOB, batch_of(rows))
    for terms in (est.first_stage_terms, est.last_stage_terms):
        activations = terms["activations_bytes"]
        assert activations[0] <= activations[1] <= activations[2]


@settings(max_examples=60, deadline=None)
@given(model=models, layout=layouts)
def test_distributed_optimizer_reduces_memory(model: ModelSpec, layout: dict[str, int]) -> None:
    layout = {**layout, "dp": max(layout["dp"], 2), "pp": min(layout["pp"], 2)}
    modes = (SHARD_NONE, SHARD_OPTIMIZER, SHARD_FULL)
    rows = [{**layout, "optimizer_sharding": m} for m in modes]
    total = estimate_memory(model, CLUSTER, JOB, batch_of(rows)).total_bytes
    assert total[1] < total[0]
    assert total[2] < total[1]


def test_fits_flips_at_the_threshold() -> None:
    batch = LayoutBatch.from_columns(tp=[2], pp=[2], dp=[16])
    total = estimate_memory(MODEL, CLUSTER, JOB, batch).total_bytes[0]
    ratio = total / GPU.hbm_bytes
    above = MemoryOptions(threshold=ratio * 1.001)
    below = MemoryOptions(threshold=ratio * 0.999)
    assert estimate_memory(MODEL, CLUSTER, JOB, batch, above).fits[0]
    assert not estimate_memory(MODEL, CLUSTER, JOB, batch, below).fits[0]


def test_hundred_thousand_layouts_are_one_vectorised_pass() -> None:
    """Speed is bench.bulk_eval's; here: no Python work per layout."""
    rng = np.random.default_rng(0)
    n = 100_000
    batch = LayoutBatch.from_columns(
        tp=rng.choice([1, 2, 4, 8], n),
        pp=rng.choice([1, 2, 4], n),
        vpp=rng.choice([1, 2], n),
        cp=rng.choice([1, 2], n),
        ep=rng.choice([1, 2, 8], n),
        etp=1,
        dp=rng.choice([1, 2, 8, 16], n),
        micro_batch_size=rng.choice([1, 2, 4], n),
        recompute=rng.choice([0, 1, 2], n),
        optimizer_sharding=rng.choice([0, 1, 2], n),
    )
    est = estimate_memory(MOE, CLUSTER, JOB, batch)
    assert est.total_bytes.shape == (n,)
    assert_calls_do_not_grow(
        lambda: estimate_memory(MOE, CLUSTER, JOB, batch.take(np.arange(1_000))),
        lambda: estimate_memory(MOE, CLUSTER, JOB, batch),
    )
