"""Scaling curves: efficiency, time and cost from hand-computed numbers; the API route, the web
page and ``planner scale`` (the last on the real planner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.planning.backend import PlanningBackend
from app.planning.scaling import gpu_counts, scaling_curve
from planner.specs import SpecError
from tests.app.conftest import FakePlanner, fake_catalog, test_settings
from tests.support.reports import plan_result_doc

PER_GPU = {64: 1000.0, 128: 900.0, 256: 800.0}  # tokens/s per GPU of the fake best plans


def fake_plan(request: dict[str, Any], *, profile: Any = None, **_: Any) -> dict[str, Any]:
    n = request["num_gpus"]
    if n not in PER_GPU:
        return plan_result_doc([], rejections={"memory": 12, "tp does not divide heads": 3})
    result = plan_result_doc([{"tp": 8, "dp": n // 8, "command": "torchrun pretrain_gpt.py"}])
    result["plans"][0]["performance"].update(
        tokens_per_s_per_gpu=PER_GPU[n], mfu=0.4, step_time_s=1
    )
    return result


BASE = {"model": "llama3.1-70b", "gpu": "h100-sxm-80gb", "seq_length": 8192}


def test_efficiency_time_and_cost_follow_from_throughput() -> None:
    req = {**BASE, "num_gpus_options": [32, 64, 128, 256], "global_batch_size": 512}
    curve = scaling_curve(
        {**req, "token_budget": 1e12, "usd_per_gpu_hour": 2.0}, plan=fake_plan
    ).raw
    first, p64, p128, p256 = curve["points"]
    assert not first["feasible"] and "12 x memory" in first["error"]
    assert curve["reference_num_gpus"] == 64  # the smallest count with a feasible layout
    assert p64["scaling_efficiency"] == 1.0
    assert p128["scaling_efficiency"] == pytest.approx(0.9)
    assert p256["scaling_efficiency"] == pytest.approx(0.8)
    assert p256["tokens_per_s"] == 256 * 800.0
    assert p256["speedup"] == pytest.approx(256 * 800 / (64 * 1000))
    seconds = 1e12 / (128 * 900.0)
    assert p128["days"] == pytest.approx(seconds / 86400)
    assert p128["gpu_hours"] == pytest.approx(seconds * 128 / 3600)
    assert p128["usd"] == pytest.approx(seconds * 128 / 3600 * 2.0)


def test_without_a_budget_there_is_no_time_or_cost() -> None:
    req = {**BASE, "num_gpus_options": [64, 128], "global_batch_size": 512}
    curve = scaling_curve(req, plan=fake_plan).raw
    assert all("days" not in p and "usd" not in p for p in curve["points"])


def test_gpu_counts_parse_ranges_and_are_bounded() -> None:
    assert gpu_counts({"num_gpus_options": "64-512"}) == [64, 128, 256, 512]
    assert gpu_counts({"num_gpus_options": "64,96"}) == [64, 96]
    with pytest.raises(SpecError, match="at most 24"):
        gpu_counts({"num_gpus_options": list(range(1, 30))})
    with pytest.raises(SpecError, match="required"):
        gpu_counts({})


@pytest.fixture
def client(tmp_path: Path) -> Any:
    fake = FakePlanner()
    backend = PlanningBackend(
        evaluate=fake.evaluate, plan=fake_plan, validate_plan=fake.validate_plan
    )
    app = create_app(
        test_settings(f"sqlite:///{tmp_path}/s.db", tmp_path, workers=0),
        backend=backend,
        catalog=fake_catalog,
    )
    from app.web.scaling import router

    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_api_returns_the_curve(client: TestClient) -> None:
    body = {**BASE, "num_gpus_options": [64, 256], "global_batch_size": 512, "token_budget": 1e12}
    response = client.post("/v1/scaling-curves", json=body)
    assert response.status_code == 200, response.text
    points = response.json()["points"]
    assert [p["num_gpus"] for p in points] == [64, 256]
    assert points[1]["scaling_efficiency"] == pytest.approx(0.8)


def test_api_bounds_the_number_of_points(client: TestClient) -> None:
    body = {**BASE, "num_gpus_options": list(range(8, 8 * 26, 8)), "global_batch_size": 512}
    assert client.post("/v1/scaling-curves", json=body).status_code == 422


def test_web_page_draws_the_table_and_chart_data(client: TestClient) -> None:
    page = client.get(
        "/scaling",
        params={"run": 1, "num_gpus": "64-256", "seq_length": 8192, "global_batch_size": 512},
    )
    assert page.status_code == 200
    assert (
        'id="scaling-table"' in page.text and "80.0\u00a0%" in page.text
    )  # one percent format (present.fmt_pct)
    data = page.text.split('id="scaling-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data) == {
        "labels": [64, 128, 256],
        "tokens_per_s": [64000, 115200, 204800],
        "efficiency": [100.0, 90.0, 80.0],
    }


def test_a_missing_global_batch_is_a_422_naming_it(client: TestClient) -> None:
    body = {**BASE, "num_gpus_options": [64, 128]}
    response = client.post("/v1/scaling-curves", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "global_batch_size"
    query = {"run": 1, "num_gpus": "64-128", "seq_length": 8192, "global_batch_size": ""}
    page = client.get("/scaling", params=query)
    assert page.status_code == 422
    assert 'id="global_batch_size-error"' in page.text


def test_web_page_marks_a_bad_field(client: TestClient) -> None:
    page = client.get("/scaling", params={"run": 1, "seq_length": "long"})
    assert page.status_code == 422
    assert 'id="seq_length-error"' in page.text


def test_cli_scale_json_on_the_real_planner() -> None:
    import typer
    from typer.testing import CliRunner

    from app.cli.scale import scale

    app = typer.Typer()  # the lead registers `scale` on the main CLI
    app.command()(scale)
    app.command("other")(lambda: None)
    args = ["scale", "--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "8-32",
            "--seq-length", "4096", "--global-batch-size", "256", "--token-budget", "1e11",
            "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    curve = json.loads(result.stdout)
    points = curve["points"]
    assert [p["num_gpus"] for p in points] == [8, 16, 32]
    assert all(p["feasible"] for p in points)
    assert points[0]["scaling_efficiency"] == 1.0
    assert points[2]["tokens_per_s"] > points[0]["tokens_per_s"]
    assert points[2]["days"] < points[0]["days"]


@pytest.mark.parametrize("field", ["usd_per_gpu_hour", "token_budget", "moe_imbalance"])
def test_a_nan_number_is_named_as_not_finite(field: str) -> None:
    from pydantic import ValidationError

    from app.planning.schemas import ScalingCurveCreate

    body = {**BASE, "num_gpus_options": [64], "global_batch_size": 512, field: float("nan")}
    with pytest.raises(ValidationError, match="finite number"):  # not "less than or equal"
        ScalingCurveCreate.model_validate(body)


def test_api_points_a_range_in_num_gpus_to_num_gpus_options(client: TestClient) -> None:
    body = {**BASE, "num_gpus": "16-64", "global_batch_size": 512}
    response = client.post("/v1/scaling-curves", json=body)
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["field"] == "num_gpus"
    assert "num_gpus_options" in error["message"] and "valid integer" not in error["message"]


def test_api_names_num_gpus_options_when_the_counts_are_missing(client: TestClient) -> None:
    response = client.post("/v1/scaling-curves", json={**BASE, "global_batch_size": 512})
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["field"] == "num_gpus_options" and "num_gpus_options" in error["message"]
