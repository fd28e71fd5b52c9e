"""When nothing fits: every suggestion really plans, and the funnel and winner are consistent."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models_db.catalog import cluster_spec, load_model
from planner.performance.step_time import default_profile
from planner.search.explain import explain_winner
from planner.search.funnel import Funnel
from planner.search.infeasible import InfeasibleAnswer, explain_infeasible
from planner.search.planning import PlanResult, SearchBudget, plan
from planner.space.enumeration import SearchConstraints
from planner.specs import TrainingJob

H100 = cluster_spec("h100-sxm-80gb", 16)
PROFILE = default_profile(H100.gpu)
BIG = load_model("llama3.1-70b")
SMALL = load_model("llama3.1-8b")
NO_RECOMPUTE = SearchConstraints(recompute=("none",))
JOB = TrainingJob(seq_length=8192, global_batch_size=64, precision="bf16")
BUDGET = SearchBudget(max_trials=50)


def _infeasible() -> tuple[PlanResult, InfeasibleAnswer]:
    result = plan(BIG, H100, JOB, constraints=NO_RECOMPUTE, profile=PROFILE, budget=BUDGET)
    assert not result.plans, "the fixture job must not fit"
    answer = explain_infeasible(
        BIG, H100, JOB, rejections=result.rejections, profile=PROFILE, constraints=NO_RECOMPUTE
    )
    return result, answer


def test_fewest_gpus_really_plans_and_fewer_do_not() -> None:
    _result, answer = _infeasible()
    assert answer.fewest_gpus is not None and answer.fewest_gpus > H100.num_gpus
    n = answer.fewest_gpus
    planned = plan(
        BIG, replace(H100, num_gpus=n), JOB, constraints=NO_RECOMPUTE, profile=PROFILE,
        budget=BUDGET,
    )  # fmt: skip
    assert planned.plans and planned.plans[0].cluster.num_gpus == n
    failed = [g for g, found in answer.gpu_probes if not found]
    assert failed and all(g < n for g in failed)


def test_every_change_is_checked_by_planning_it() -> None:
    _result, answer = _infeasible()
    changes = answer.changes
    assert changes and changes[0].kind == "num_gpus"
    for change in changes:
        req = change.request
        cluster = replace(H100, num_gpus=req.get("num_gpus", H100.num_gpus))
        job = replace(JOB, seq_length=req.get("seq_length", JOB.seq_length))
        constraints = NO_RECOMPUTE
        if "recompute" in req:
            constraints = replace(constraints, recompute=tuple(req["recompute"]))
        if "optimizer_sharding" in req:
            sharding = tuple(req["optimizer_sharding"])
            constraints = replace(constraints, optimizer_sharding=sharding)
        if "optimizer_offload_fraction" in req:
            memory = replace(
                constraints.memory,
                optimizer_offload_fraction=tuple(req["optimizer_offload_fraction"]),
            )
            constraints = replace(constraints, memory=memory)
        found = plan(BIG, cluster, job, constraints=constraints, profile=PROFILE, budget=BUDGET)
        assert found.plans, f"{change.description} was suggested but does not plan"


def test_nearest_layouts_say_how_far_over_the_limit_they_are() -> None:
    _result, answer = _infeasible()
    nearest = answer.nearest
    assert nearest
    overs = [n.over_bytes for n in nearest]
    assert overs == sorted(overs) and overs[0] > 0
    first = nearest[0]
    assert first.over_fraction == pytest.approx(first.over_bytes / first.limit_bytes)
    assert first.total_bytes == pytest.approx(first.limit_bytes + first.over_bytes)
    assert answer.to_dict()["nearest"][0]["fits"] is False


def test_every_rejection_reason_has_a_fix() -> None:
    result, answer = _infeasible()
    fixes = {f.reason: f.fix for f in answer.fixes}
    assert set(fixes) == set(result.rejections)
    assert all(fix and "Loosen the setting" not in fix for fix in fixes.values())


def test_the_funnel_shrinks_and_matches_the_rejections() -> None:
    result = plan(SMALL, H100, replace(JOB, seq_length=4096), profile=PROFILE, budget=BUDGET)
    funnel = result.funnel
    assert funnel.ranked == len(result.plans)
    rejected = sum(result.rejections.values())
    assert funnel.enumerated - funnel.feasible == rejected
    assert [s["key"] for s in funnel.to_dict()["steps"]] == [
        "enumerated", "valid", "feasible", "evaluated", "ranked",
    ]  # fmt: skip
    assert result.to_dict()["funnel"]["sentence"].endswith(f"{len(result.plans)} ranked")


def test_a_funnel_that_grows_is_refused() -> None:
    with pytest.raises(ValueError, match="shrink"):
        Funnel(enumerated=10, valid=20, feasible=5, evaluated=5, ranked=5)


def test_the_winner_sentence_names_the_largest_difference() -> None:
    def plan_json(speed: float, **parts: float) -> dict[str, object]:
        return {
            "performance": {
                "tokens_per_s_per_gpu": speed,
                "step_time_s": sum(parts.values()),
                "breakdown": parts,
            },
            "memory": {"headroom_bytes": 1e9},
        }

    first = plan_json(1120.0, compute_s=3.0, bubble_s=0.10, tp_comm_s=0.30)
    second = plan_json(1000.0, compute_s=3.0, bubble_s=0.51, tp_comm_s=0.25)
    why = explain_winner(first, second)
    assert why is not None
    assert why.sentence == (
        "#1 is 12 % faster than #2: 0.41 s less pipeline bubble, 0.05 s more TP communication"
    )
    tie = explain_winner(first, plan_json(1119.0, compute_s=3.4))
    assert tie is not None and tie.sentence.startswith("#1 and #2 are equally fast")
