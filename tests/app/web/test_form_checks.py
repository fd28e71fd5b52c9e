"""The plan form's checks: every problem at once, in plain words, with the API's bounds; and
what the result pages read from the planner's funnel, winner and infeasible blocks."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.planning.reports import PlanResult, RankedPlan
from app.planning.schemas import PlanJobCreate
from app.web import form_checks, insight
from tests.app.web.test_web import FORM, client, field_block  # noqa: F401  (fixture)
from tests.support.reports import plan_doc, plan_result_doc

GIB = 2**30


def test_every_empty_required_field_is_reported_at_once() -> None:
    errors = form_checks.check_values({"model_source": "catalog"})
    assert set(errors) == {"model", "gpu", "num_gpus", "seq_length", "global_batch_size"}
    assert all("_" not in message for message in errors.values())  # no internal names


def test_bounds_are_the_apis() -> None:
    schema = PlanJobCreate.model_json_schema()["properties"]["gpus_per_node"]
    low, high = form_checks.bounds("gpus_per_node")
    assert (low, high) == (1.0, float(schema["anyOf"][0]["maximum"]))
    rules = form_checks.input_rules("seq_length")
    assert rules["data-min"] == "1" and rules["data-max"] == "1048576"


def test_out_of_range_and_conflicting_values_name_their_fields() -> None:
    values = dict(FORM) | {"gpus_per_node": "0", "seq_length": "-8192"}
    errors = form_checks.check_values(values)
    assert errors["gpus_per_node"] == "GPUs per node must be between 1 and 576."
    assert "between 1 and 1,048,576" in errors["seq_length"]
    both = form_checks.check_values(dict(FORM) | {"num_gpus": "64", "num_nodes": "4"})
    assert both["num_gpus"] == both["num_nodes"]
    assert "64 GPUs is not 4 nodes of 8" in both["num_gpus"]
    assert not form_checks.check_values(dict(FORM) | {"num_gpus": "64-512"})  # a range is fine


def test_a_cluster_replaces_the_gpu_and_its_node_size() -> None:
    values = dict(FORM) | {"gpu": "", "cluster": "dgx-h100", "gpus_per_node": "3"}
    assert not form_checks.check_values(values | {"num_gpus": "64"})


def test_the_server_returns_every_field_error_at_once(client: TestClient) -> None:  # noqa: F811
    data = FORM | {"num_gpus": "", "seq_length": "0", "global_batch_size": "", "gpus_per_node": "0"}
    response = client.post("/plans", data=data)
    assert response.status_code == 422
    for name in ("num_gpus", "seq_length", "global_batch_size", "gpus_per_node"):
        block = field_block(response.text, name)
        assert 'aria-invalid="true"' in block, name
    assert "4 fields to fix" in response.text


def test_rejections_get_a_fix_each() -> None:
    rejections = {"tp must divide num_attention_heads": 5, "needs more than 80 % of GPU memory": 9}
    result = PlanResult.model_validate(plan_result_doc([], rejections=rejections))
    rows = insight.rejection_rows(result, {})
    assert [r["count"] for r in rows] == [9, 5]
    assert rows[0]["fix"].startswith("Use more GPUs")
    assert "attention heads" in rows[1]["fix"]


def test_a_change_replaces_the_gpu_range() -> None:
    request = {"model": "m", "num_gpus_options": [16, 32], "seq_length": 4096}
    changed = insight.change_request(request, {"request": {"num_gpus": 64, "evil": 1}})
    assert changed == {"model": "m", "num_gpus": 64, "seq_length": 4096}


def test_stage_rows_show_every_stage_when_given() -> None:
    every = {"stage_bytes": [3 * GIB, 2 * GIB, 2 * GIB], "first_stage_bytes": 3 * GIB}
    plan = RankedPlan.model_validate(plan_doc(memory=every))
    assert insight.stage_rows(plan) == [("stage 0", 3.0), ("stage 1", 2.0), ("stage 2", 2.0)]
    ends = {"first_stage_bytes": 3 * GIB, "last_stage_bytes": GIB}
    plan = RankedPlan.model_validate(plan_doc(memory=ends))
    assert insight.stage_rows(plan) == [("first", 3.0), ("last", 1.0)]


def test_prediction_is_read_only_when_present() -> None:
    assert insight.prediction(RankedPlan.model_validate(plan_doc())) == {
        "tokens": None,
        "step": None,
        "extrapolation": [],
        "regime": None,
        "fallback": None,
        "rule": None,
    }
    doc = plan_doc()
    doc["performance"] |= {"step_time_interval_s": [1.0, 2.0], "extrapolation": ["beyond the data"]}
    doc["performance"]["interval"] = {
        "regime": "all",
        "fallback": "moe has 1.7 effective rows",
        "band": "80 % predictive band widened for a campaign the fit never saw",
    }
    shown = insight.prediction(RankedPlan.model_validate(doc))
    assert shown["step"] == (1.0, 2.0) and shown["extrapolation"] == ["beyond the data"]
    assert shown["regime"] == "all" and shown["fallback"] == "moe has 1.7 effective rows"
    assert shown["rule"] == "80 % predictive band widened for a campaign the fit never saw"


def test_infeasible_points_are_hollow_and_bring_the_limit() -> None:
    doc = plan_result_doc([])
    doc["infeasible"] = {
        "moe": False,
        "nearest": [
            {
                "layout": {"tp": 8, "pp": 2, "dp": 1, "etp": 8},
                "total_bytes": 90 * GIB,
                "limit_bytes": 64 * GIB,
                "tokens_per_s_per_gpu": 1000.0,
            }
        ],
    }
    result = PlanResult.model_validate(doc)
    chart = insight.add_infeasible_points({"points": [], "limit": None, "over": 0}, result)
    assert chart["limit"] == 64.0 and chart["over"] == 1
    assert chart["points"][0]["fits"] is False and "ETP" not in chart["points"][0]["label"]


def test_nodes_of_a_chosen_cluster_use_its_gpus_per_node(client: TestClient) -> None:  # noqa: F811
    data = FORM | {"cluster": "dgx-h100", "num_gpus": "", "num_nodes": "2"}
    data.pop("gpu")
    data.pop("gpus_per_node")
    response = client.post("/plans", data=data, follow_redirects=False)
    assert response.status_code == 303, response.text[:800]
    job = client.get("/v1/plan-jobs/" + response.headers["location"].rsplit("/", 1)[-1]).json()
    assert job["request"]["num_gpus"] == 16 and job["request"]["cluster"] == "dgx-h100"


def test_a_fixed_tp_that_cannot_split_the_heads_is_flagged_before_a_search() -> None:
    errors = form_checks.check_values(dict(FORM) | {"model": "llama3.1-70b", "tp": "3"})
    assert errors == {"tp": "TP 3 does not divide the 64 attention heads of llama3.1-70b: "
                      "use 1, 2, 4, 8, 16, 32, 64."}  # fmt: skip
    assert not form_checks.check_values(dict(FORM) | {"model": "llama3.1-70b", "tp": "8"})


def test_trying_a_change_a_result_does_not_suggest_is_a_404_page(client: TestClient) -> None:  # noqa: F811
    from tests.app.web.test_web import submit, wait_done

    location = submit(client)
    wait_done(client, location)
    response = client.post(f"{location}/try/0")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "suggests no change 0" in response.text


def test_the_infeasible_heading_is_a_whole_sentence() -> None:
    from types import SimpleNamespace

    from app.web.templating import templates

    env = templates(SimpleNamespace(state=SimpleNamespace())).env
    block = {"num_gpus": 8, "fewest_gpus": 496, "changes": [], "nearest": []}
    html = env.get_template("_infeasible.html").render(infeasible=block, job={"id": "j"})
    assert "No layout fits on 8 GPUs: what would make it fit</h3>" in html


def test_infinite_and_nan_numbers_are_field_errors_not_a_crash() -> None:
    values = dict(FORM) | {
        "global_batch_size": "1e999",
        "seq_length": "nan",
        "token_budget": "nan",
    }
    errors = form_checks.check_values(values)
    assert errors["global_batch_size"].endswith("must be a finite number; you typed '1e999'.")
    assert "whole number (ASCII digits 0-9 only" in errors["seq_length"]
    assert "a number (ASCII digits with an optional '.' and exponent" in errors["token_budget"]
