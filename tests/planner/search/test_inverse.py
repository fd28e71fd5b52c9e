"""Inverse questions: the value reached fits, the next one does not, plans state the value."""

from __future__ import annotations

from dataclasses import replace

from models_db.catalog import cluster_spec, load_model
from planner.performance.step_time import default_profile
from planner.search.inverse import (
    feasible_layouts,
    fewest_gpus,
    largest_micro_batch,
    longest_sequence,
)
from planner.search.planning import SearchBudget
from planner.specs import TrainingJob

V100 = cluster_spec("v100-sxm2-4x", 8)
PROFILE = default_profile(V100.gpu)
MODEL = load_model("llama3.1-8b")
JOB = TrainingJob(seq_length=2048, global_batch_size=64, precision="fp16")
BUDGET = SearchBudget(max_trials=50)


def test_longest_sequence_fits_and_one_step_more_does_not() -> None:
    answer = longest_sequence(MODEL, V100, JOB, profile=PROFILE, top_k=2, budget=BUDGET)
    assert answer.value is not None and answer.value % 128 == 0
    assert feasible_layouts(MODEL, V100, replace(JOB, seq_length=answer.value), None, 0.8) > 0
    assert (
        feasible_layouts(MODEL, V100, replace(JOB, seq_length=answer.value + 128), None, 0.8) == 0
    )
    plans = answer.to_dict()["plans"]
    assert plans and all(p["seq_length"] == answer.value for p in plans)
    assert answer.plans[0].job.seq_length == answer.value


def test_longest_sequence_is_longer_on_a_larger_memory() -> None:
    large = replace(V100, gpu=replace(V100.gpu, hbm_bytes=V100.gpu.hbm_bytes * 3 // 2))
    base = longest_sequence(MODEL, V100, JOB, profile=PROFILE, top_k=1, budget=BUDGET)
    more = longest_sequence(MODEL, large, JOB, profile=PROFILE, top_k=1, budget=BUDGET)
    assert base.value is not None and more.value is not None and more.value > base.value


def test_largest_micro_batch_fits_and_the_next_divisor_does_not() -> None:
    answer = largest_micro_batch(MODEL, V100, JOB, profile=PROFILE, top_k=1, budget=BUDGET)
    assert answer.value is not None
    assert all(p.layout.micro_batch_size == answer.value for p in answer.plans)
    bigger = [b for b, n in answer.probes if b > answer.value]
    assert bigger and all(n == 0 for b, n in answer.probes if b > answer.value)


def test_fewest_gpus_walks_up_to_the_first_size_that_fits() -> None:
    h100 = cluster_spec("dgx-h100", 64)
    job = TrainingJob(seq_length=8192, global_batch_size=64)
    answer = fewest_gpus(MODEL, h100, job, profile=PROFILE, top_k=1, budget=BUDGET)
    assert answer.value is not None
    assert [n for n, count in answer.probes if count] == [answer.value]
    assert answer.plans[0].cluster.num_gpus == answer.value


def test_nothing_fits_is_an_answer_not_an_error() -> None:
    # Llama-3.1-70B on 8 V100-32GB: Megatron's optimizer offload moves only the Adam moments,
    # so weights, gradients and master weights (12 B x 8.8e9 parameters per GPU) stay on the GPU
    answer = longest_sequence(load_model("llama3.1-70b"), V100, JOB, profile=PROFILE, top_k=1)
    assert answer.value is None and answer.plans == [] and answer.probes == ((128, 0),)
