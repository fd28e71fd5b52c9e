"""The plan result's funnel, winner and infeasible blocks, as the API, the CLI and the SDK see
them (``planner plan --json`` and ``GET /v1/plan-jobs/{id}/plans`` share this JSON)."""

from __future__ import annotations

from app.planning.compute import plan_request
from app.planning.reports import PlanResult

TOO_BIG = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 16,
    "seq_length": 8192,
    "global_batch_size": 64,
    "recompute": ["none"],
}


def test_an_infeasible_plan_names_a_gpu_count_that_really_plans() -> None:
    result = plan_request(TOO_BIG).raw
    assert not result["plans"]
    infeasible = PlanResult.model_validate(result).infeasible
    assert infeasible is not None and infeasible["fewest_gpus"] > 16
    assert result["funnel"]["feasible"] == 0 and result["funnel"]["valid"] > 0
    planned = plan_request(TOO_BIG | {"num_gpus": infeasible["fewest_gpus"]}).raw
    assert planned["plans"], "the named GPU count must plan"
    for change in infeasible["changes"]:  # each suggestion plans as the API would run it
        assert plan_request(TOO_BIG | change["request"]).plans, change["description"]


def test_a_feasible_plan_has_a_funnel_and_a_winner_but_no_infeasible_block() -> None:
    result = plan_request(TOO_BIG | {"model": "llama3.1-8b", "recompute": None}).raw
    assert result["plans"] and "infeasible" not in result
    funnel = result["funnel"]
    assert funnel["ranked"] == len(result["plans"]) <= funnel["evaluated"] <= funnel["feasible"]
    assert result["winner"]["sentence"].startswith("#1 ")
