"""Hypothesis properties of the planner's invariants not covered elsewhere (memory monotonicity
and flag round trips live in memory/test_properties.py and megatron/test_flags.py): layouts that
pass
Megatron's rules tile the cluster and the batch exactly; evaluate's breakdown sums to the step
time; throughput numbers stay physical."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.performance.profile import default_profile
from planner.search.evaluate import evaluate_layouts
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.rules import check_rules
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import SMALL_DENSE, SMALL_GPU, SMALL_MOE

GPU, MOE = SMALL_GPU, SMALL_MOE
DENSE = replace(SMALL_DENSE, name="dense", num_layers=24)
PROPS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
models = st.sampled_from([DENSE, MOE])
gpu_counts = st.sampled_from([8, 16, 24, 32, 48, 64])
batch_sizes = st.sampled_from([32, 48, 64, 96, 128, 256])


@PROPS
@given(model=models, num_gpus=gpu_counts, gbs=batch_sizes)
def test_rule_abiding_layouts_tile_the_cluster_and_the_batch(
    model: ModelSpec, num_gpus: int, gbs: int
) -> None:
    cluster = ClusterSpec(name="c", gpu=GPU, num_gpus=num_gpus)
    job = TrainingJob(seq_length=4096, global_batch_size=gbs)
    batch = enumerate_layouts(model, cluster, job, SearchConstraints())
    valid = ~check_rules(model, cluster, job, batch).any(axis=1)
    assert valid.any()
    ok = batch.take(np.flatnonzero(valid))
    assert np.all(ok.tp * ok.pp * ok.cp * ok.dp == num_gpus)
    assert np.all(ok.num_microbatches(gbs) * ok.micro_batch_size * ok.dp == gbs)


@PROPS
@given(
    model=models,
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4]),
    mbs=st.sampled_from([1, 2]),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_breakdown_sums_to_the_step_time(
    model: ModelSpec, tp: int, pp: int, mbs: int, recompute: str
) -> None:
    num_gpus = 64
    cluster = ClusterSpec(name="c", gpu=GPU, num_gpus=num_gpus)
    job = TrainingJob(seq_length=4096, global_batch_size=256)
    layout = Layout(
        tp=tp,
        pp=pp,
        dp=num_gpus // (tp * pp),
        micro_batch_size=mbs,
        recompute=recompute,  # type: ignore[arg-type]
    )
    (result,) = evaluate_layouts(model, cluster, job, [layout], default_profile(GPU))
    if not result["valid"]:
        return
    perf = result["performance"]
    assert math.isclose(sum(perf["breakdown"].values()), perf["step_time_s"], rel_tol=1e-9)
    assert all(v >= 0 for v in perf["breakdown"].values())
    assert 0 < perf["mfu"] <= 1
    tokens = job.global_batch_size * job.seq_length
    assert math.isclose(
        perf["tokens_per_s_per_gpu"], tokens / (perf["step_time_s"] * num_gpus), rel_tol=1e-9
    )
