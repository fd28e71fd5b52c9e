"""The result page says which stack settings the planner chose (issue 12): the funnel's choices
sentence, as the API and ``planner plan`` give it."""

from __future__ import annotations

from app.planning.compute import plan_request
from app.planning.reports import PlanResult
from app.web.views import result_head

JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16, "seq_length": 32768,
       "global_batch_size": 16, "top_k": 3, "max_trials": 200}  # fmt: skip


def test_the_heading_carries_the_planners_choices() -> None:
    result = plan_request(JOB)
    assert isinstance(result, PlanResult)
    funnel = result.funnel or {}
    chosen = result_head(result)["chosen"]
    assert chosen == funnel["choices_sentence"]
    assert "cp_comm_type" in chosen and "cuda_graphs" in chosen


def test_nothing_is_said_when_the_request_fixed_them() -> None:
    result = plan_request({**JOB, "cp": 1, "cuda_graphs": "none"})
    assert isinstance(result, PlanResult)
    assert "choices" not in (result.funnel or {})
    assert result_head(result)["chosen"] is None
