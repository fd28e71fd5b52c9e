"""The search: exhaustive is the oracle, TPE must come close, results are ranked and honest."""

from __future__ import annotations

import itertools

import numpy as np
import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.layouts import LayoutBatch
from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.performance.step_time import default_profile, estimate_performance
from planner.search.objectives import Objective
from planner.search.planning import SearchBudget, memory_reason, plan
from planner.search.ranking import pareto_front, rank_order
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.rules import check_rules
from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, SpecError, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, LLAMA_70B

GIB = 2**30

SMALL_GPU = GPUSpec(
    name="tiny-test",
    hbm_bytes=4 * GIB,
    hbm_bandwidth_bytes_per_s=1e12,
    peak_bf16_flop_per_s=100e12,
    peak_fp8_flop_per_s=None,
    intra_node_bandwidth_bytes_per_s=100e9,
)
# Llama-3.1-8B shapes (meta-llama/Llama-3.1-8B config.json)
# Llama-3.1-70B shapes (meta-llama/Llama-3.1-70B config.json)
PROFILE = default_profile(H100)
JOB = TrainingJob(seq_length=4096, global_batch_size=64)
# a small space: the exhaustive answer is the oracle for the sampled one
SMALL = SearchConstraints(optimizer_sharding=("optimizer",), max_pp=4)
TPE_BUDGET = SearchBudget(max_trials=256, exhaustive_below=0, seed=3)


def cluster(num_gpus: int, gpu: GPUSpec = H100) -> ClusterSpec:
    return ClusterSpec(name=f"test-{num_gpus}", gpu=gpu, num_gpus=num_gpus)


def oracle_best(
    model: ModelSpec, c: ClusterSpec, job: TrainingJob, constraints: SearchConstraints
) -> float:
    """Best job tokens/s by brute force, independently of plan()'s bookkeeping."""
    batch = enumerate_layouts(model, c, job, constraints)
    ok = batch.take(~check_rules(model, c, job, batch).any(axis=1))
    fits = estimate_memory(model, c, job, ok, MemoryOptions(threshold=0.8)).fits
    perf = estimate_performance(model, c, job, ok.take(fits), PROFILE)
    return float(np.max(perf.tokens_per_s_per_gpu)) * c.num_gpus


# --- objectives -------------------------------------------------------------------------------
def test_time_to_train_needs_a_token_budget() -> None:
    with pytest.raises(SpecError, match="token_budget"):
        Objective(kind="time_to_train")


def test_cost_needs_a_price() -> None:
    with pytest.raises(SpecError, match="usd_per_gpu_hour"):
        Objective(kind="cost", token_budget=1e12)


def test_unknown_objective_kind_is_rejected() -> None:
    with pytest.raises(SpecError, match="not one of throughput"):
        Objective(kind="speed")  # type: ignore[arg-type]


def test_objective_values_in_their_units() -> None:
    per_gpu, gpus = np.array([1000.0]), np.array([8.0])
    # 1e12 tokens at 8000 tokens/s = 1.25e8 s = 1446.76 days; 1e6 GPU-s... = 2.5e8/3600*8 $
    assert Objective().values(per_gpu, gpus)[0] == 8000.0
    days = Objective(kind="time_to_train", token_budget=1e12).values(per_gpu, gpus)[0]
    assert days == pytest.approx(1.25e8 / 86400)
    usd = Objective(kind="cost", token_budget=1e12, usd_per_gpu_hour=2.0).values(per_gpu, gpus)[0]
    assert usd == pytest.approx(1.25e8 * 8 / 3600 * 2.0)


# --- ranking ----------------------------------------------------------------------------------
def test_ties_go_to_more_headroom_then_fewer_gpus() -> None:
    score = np.array([5.0, 7.0, 7.0, 7.0])
    headroom = np.array([9.0, 1.0, 3.0, 3.0])
    gpus = np.array([8, 8, 16, 8])
    assert rank_order(score, headroom, gpus).tolist() == [3, 2, 1, 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=40))
def test_pareto_front_is_exactly_the_non_dominated_set(points: list[tuple[int, int]]) -> None:
    score = np.array([p[0] for p in points], dtype=np.float64)
    head = np.array([p[1] for p in points], dtype=np.float64)
    front = set(pareto_front(score, head).tolist())

    def dominated(i: int) -> bool:
        return any(
            score[j] >= score[i]
            and head[j] >= head[i]
            and (score[j] > score[i] or head[j] > head[i])
            for j in range(len(points))
        )

    expected_values = {points[i] for i in range(len(points)) if not dominated(i)}
    assert {points[i] for i in front} == expected_values
    assert len(front) == len(expected_values)  # one representative per duplicate point


# --- the search -------------------------------------------------------------------------------
def test_exhaustive_search_finds_the_brute_force_optimum() -> None:
    result = plan(LLAMA_8B, cluster(16), JOB, constraints=SMALL, profile=PROFILE)
    assert result.search.method == "exhaustive"
    assert result.search.proven_optimal
    best = oracle_best(LLAMA_8B, cluster(16), JOB, SMALL)
    assert result.plans[0].objective_value == pytest.approx(best, rel=1e-12)


def test_plans_are_ranked_best_first() -> None:
    result = plan(LLAMA_8B, cluster(16), JOB, constraints=SMALL, profile=PROFILE, top_k=20)
    values = [p.objective_value for p in result.plans]
    assert len(values) == 20
    # scores equal to 1e-9 count as ties (then headroom decides), so allow that much disorder
    assert all(a >= b * (1 - 1e-9) for a, b in itertools.pairwise(values))
    assert values[0] > values[-1]


def test_tpe_comes_within_two_percent_of_the_exhaustive_optimum() -> None:
    c = cluster(64)
    sampled = plan(LLAMA_8B, c, JOB, profile=PROFILE, budget=TPE_BUDGET)
    assert sampled.search.method == "tpe"
    assert not sampled.search.proven_optimal
    assert sampled.search.evaluated < sampled.search.feasible
    best = oracle_best(LLAMA_8B, c, JOB, SearchConstraints())
    assert sampled.plans[0].objective_value >= 0.98 * best


def test_same_seed_gives_the_same_answer() -> None:
    budget = SearchBudget(max_trials=64, exhaustive_below=0, seed=11, polish_rounds=0)
    first = plan(LLAMA_8B, cluster(64), JOB, profile=PROFILE, budget=budget)
    second = plan(LLAMA_8B, cluster(64), JOB, profile=PROFILE, budget=budget)
    assert [p.layout for p in first.plans] == [p.layout for p in second.plans]
    assert [t.params for t in first.study.trials] == [t.params for t in second.study.trials]


def test_fixed_tp_and_max_pp_are_respected() -> None:
    constraints = SearchConstraints(tp=2, max_pp=2)
    result = plan(LLAMA_8B, cluster(64), JOB, constraints=constraints, profile=PROFILE, top_k=50)
    assert result.plans
    assert {p.layout.tp for p in result.plans} == {2}
    assert max(p.layout.pp for p in result.plans) <= 2


def test_every_plan_passes_the_rules_and_fits() -> None:
    c = cluster(32)
    result = plan(LLAMA_70B, c, JOB, profile=PROFILE, top_k=30, pareto=True)
    layouts = [p.layout for p in result.plans + result.pareto]
    batch = LayoutBatch.from_layouts(layouts)
    assert not check_rules(LLAMA_70B, c, JOB, batch).any()
    assert estimate_memory(LLAMA_70B, c, JOB, batch, MemoryOptions(threshold=0.8)).fits.all()
    assert all(p.memory["fits"] and p.memory["headroom_bytes"] >= 0 for p in result.plans)


def test_nothing_feasible_gives_empty_plans_and_the_reasons() -> None:
    result = plan(LLAMA_70B, cluster(8, SMALL_GPU), JOB, profile=default_profile(SMALL_GPU))
    assert result.plans == []
    assert result.search.feasible == 0
    assert result.rejections[memory_reason(0.8)] > 0
    assert sum(result.rejections.values()) == result.search.enumerated
    assert result.to_dict()["plans"] == []


def test_cost_prefers_fewer_gpus_where_throughput_prefers_more() -> None:
    clusters = [cluster(8), cluster(128)]
    fast = plan(LLAMA_8B, clusters, JOB, profile=PROFILE)
    cheap = plan(
        LLAMA_8B,
        clusters,
        JOB,
        profile=PROFILE,
        objective=Objective(kind="cost", token_budget=1e12, usd_per_gpu_hour=2.0),
    )
    assert fast.plans[0].cluster.num_gpus == 128
    assert cheap.plans[0].cluster.num_gpus == 8
    assert cheap.plans[0].objective["usd"] == pytest.approx(cheap.plans[0].objective_value)


def test_time_to_train_ranks_by_fewest_days() -> None:
    objective = Objective(kind="time_to_train", token_budget=1e12)
    result = plan(
        LLAMA_8B, cluster(16), JOB, constraints=SMALL, profile=PROFILE, objective=objective, top_k=5
    )
    days = [p.objective_value for p in result.plans]
    assert all(a <= b * (1 + 1e-9) for a, b in itertools.pairwise(days))
    best = oracle_best(LLAMA_8B, cluster(16), JOB, SMALL)
    assert days[0] == pytest.approx(1e12 / best / 86400, rel=1e-9)


def test_ranges_find_the_best_of_the_separate_searches() -> None:
    objective = Objective(kind="cost", token_budget=1e12, usd_per_gpu_hour=2.0)
    result = plan(
        LLAMA_8B,
        cluster(8),
        JOB,
        constraints=SMALL,
        profile=PROFILE,
        objective=objective,
        num_gpus_options=[8, 16],
        global_batch_size_options=[32, 64],
    )
    assert result.search.scenarios == 4
    separate = [
        plan(
            LLAMA_8B,
            cluster(n),
            TrainingJob(seq_length=4096, global_batch_size=b),
            constraints=SMALL,
            profile=PROFILE,
            objective=objective,
            top_k=1,
        ).plans[0]
        for n, b in itertools.product([8, 16], [32, 64])
    ]
    best = min(separate, key=lambda p: p.objective_value)
    assert result.plans[0].objective_value == pytest.approx(best.objective_value, rel=1e-9)
    top = result.plans[0]
    assert top.layout.num_gpus == top.cluster.num_gpus == top.objective["num_gpus"]


def test_sampled_search_over_ranges_reports_num_gpus_as_a_parameter() -> None:
    budget = SearchBudget(max_trials=32, exhaustive_below=0, polish_rounds=0)
    result = plan(
        LLAMA_8B,
        cluster(8),
        JOB,
        constraints=SMALL,
        profile=PROFILE,
        budget=budget,
        num_gpus_options=[8, 16],
    )
    assert result.study is not None
    assert "num_gpus" in result.study.trials[0].distributions
    assert {t.params["num_gpus"] for t in result.study.trials} <= {8, 16}


def test_pareto_front_ignores_headroom_finer_than_its_step() -> None:
    score = np.array([10.0, 9.0, 5.0])
    headroom = np.array([100.0, 101.0, 300.0])
    assert pareto_front(score, headroom).tolist() == [0, 1, 2]
    assert pareto_front(score, headroom, headroom_step_bytes=50.0).tolist() == [0, 2]


def test_pareto_plans_are_mutually_non_dominated() -> None:
    result = plan(LLAMA_8B, cluster(16), JOB, constraints=SMALL, profile=PROFILE, pareto=True)
    step = 2.0**28  # plan() compares headroom in 256 MiB steps
    pts = [(p.objective_value, p.memory["headroom_bytes"] // step) for p in result.pareto]
    assert len(pts) >= 2
    for a, b in itertools.permutations(pts, 2):
        assert not (b[0] >= a[0] and b[1] >= a[1])


def test_to_dict_has_the_documented_shape() -> None:
    out = plan(LLAMA_8B, cluster(16), JOB, constraints=SMALL, profile=PROFILE).to_dict()
    assert set(out) == {"plans", "search", "funnel", "rejections", "pareto", "winner"}
    assert set(out["plans"][0]) == {"layout", "memory", "performance", "objective"}
    assert set(out["plans"][0]["layout"]) == set(Layout().to_dict())
    assert {"evaluated", "feasible", "proven_optimal", "elapsed_s"} <= set(out["search"])


def test_progress_reaches_its_total() -> None:
    calls: list[tuple[int, int]] = []
    plan(
        LLAMA_8B,
        cluster(64),
        JOB,
        profile=PROFILE,
        budget=SearchBudget(max_trials=64, exhaustive_below=0, polish_rounds=0),
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls[-1] == (64, 64)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_a_given_storage_receives_the_exhaustive_trials() -> None:
    storage = optuna.storages.InMemoryStorage()
    result = plan(
        LLAMA_8B,
        cluster(16),
        JOB,
        constraints=SMALL,
        profile=PROFILE,
        storage=storage,
        study_name="s1",
        budget=SearchBudget(max_trials=10),
    )
    loaded = optuna.load_study(study_name="s1", storage=storage)
    assert len(loaded.trials) == min(10, result.search.feasible)
    assert loaded.best_value == pytest.approx(result.plans[0].objective_value)


def test_time_limit_stops_the_sampled_search_with_an_answer() -> None:
    budget = SearchBudget(max_trials=100_000, exhaustive_below=0, time_limit_s=0.3)
    result = plan(LLAMA_8B, cluster(64), JOB, profile=PROFILE, budget=budget)
    assert result.search.trials < 100_000
    assert result.search.elapsed_s < 5.0
    assert result.plans


def test_budget_rejects_zero_trials() -> None:
    with pytest.raises(SpecError, match="max_trials"):
        SearchBudget(max_trials=0)
