"""How the web UI presents results: units, component tables, variants, the launch command and
script, HTML error pages and the navigation (the browser tests check the same at two widths)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.planning.reports import PlanResult, RankedPlan
from app.web import views
from app.web.backend import read_result
from app.web.launch import flag_lines, launch_command, launch_script
from app.web.present import (
    component_rows,
    fmt_gib,
    fmt_seconds,
    group_variants,
    is_moe,
    objective_columns,
)
from tests.app.keys.test_auth import GOOD_SECRET
from tests.support.reports import plan_doc, plan_result_doc

GIB = 2**30


def plan(
    *,
    args: tuple[str, ...] = (),
    command: str = "",
    memory: dict[str, Any] | None = None,
    perf: dict[str, Any] | None = None,
    **axes: Any,
) -> RankedPlan:
    """A typed plan (TP2 DP8 unless ``axes`` say otherwise); ``memory`` and ``perf`` override."""
    memory = {"breakdown": {}} | (memory or {})
    base = {"tp": 2, "etp": 2, "dp": 8, "moe_a2a_overlap": False} | axes
    doc = plan_doc(step_time_s=5.0, memory=memory, command=command, **base)
    doc["performance"] |= {"tokens_per_s_per_gpu": 1000.0, "breakdown": {}} | (perf or {})
    doc["megatron"]["args"] = ["--tensor-model-parallel-size", "2", *args]
    return RankedPlan.model_validate(doc)


def test_one_precision_per_unit() -> None:
    assert fmt_gib(52.2345) == "52.2\u00a0GiB"
    assert fmt_gib(3 * GIB, from_bytes=True) == "3.0\u00a0GiB"
    assert fmt_seconds(14.752) == "14.75\u00a0s"
    assert fmt_seconds(None) == fmt_gib(float("nan")) == "–"


def test_component_rows_drop_zeros_and_share_the_total() -> None:
    breakdown = {"weights_bytes": 6 * GIB, "fp8_bytes": 0.0, "activations_bytes": 2 * GIB}
    breakdown["embedding_input_bytes"] = 1024.0  # rounds to 0.0 GiB: not shown
    rows = component_rows(breakdown, views.MEMORY_LABELS, GIB, 8 * GIB)
    assert [r["label"] for r in rows] == ["Weights", "Activations"]
    assert [r["share"] for r in rows] == pytest.approx([0.75, 0.25])


def test_charts_list_only_non_zero_categories() -> None:
    p = plan(
        memory={"breakdown": {"weights_bytes": 6 * GIB, "fp8_bytes": 0.0}},
        perf={"breakdown": {"compute_s": 4.0, "ep_comm_s": 0.0, "tp_comm_s": 0.001}},
    )
    assert views.memory_chart(p)["labels"] == ["Weights"]
    assert views.time_chart(p)["labels"] == ["Compute"]


def test_memory_axis_reaches_past_the_limit_and_the_stack() -> None:
    p = plan(memory={"total_bytes": 95 * GIB, "breakdown": {"weights_bytes": 95 * GIB}})
    chart = views.memory_chart(p)
    assert chart["axis_max"] >= 95 and chart["axis_max"] >= chart["limit"]


def test_dense_plans_show_no_expert_parallelism() -> None:
    dense = plan()
    assert not is_moe(dense)
    assert views.plan_row(1, dense)["layout"] == "TP2 PP1 DP8 mbs1"
    moe = plan(ep=8, etp=1, args=("--num-experts", "8"))
    assert views.plan_row(1, moe)["layout"] == "TP2 PP1 EP8 DP8 mbs1"


def test_slower_recompute_variant_is_grouped_under_its_best() -> None:
    best, other = plan(), plan(tp=4, dp=4)
    variant = plan(recompute="selective", perf={"step_time_s": 5.5})
    plans = [best, other, variant]
    rows = [views.plan_row(i + 1, p) for i, p in enumerate(plans)]
    grouped = group_variants(rows, plans)
    assert [r["rank"] for r in grouped] == [1, 2]
    assert [v["rank"] for v in grouped[0]["variants"]] == [3]
    assert "recompute selective (best: none)" in grouped[0]["variants"][0]["differs"]


def test_objective_columns_appear_only_with_values() -> None:
    priced = plan()
    priced.objective = priced.objective.model_copy(
        update={"days": 6.5, "gpu_hours": 2497.0, "usd": 6243.0}
    )
    assert objective_columns([priced]) == {"days": True, "gpu_hours": True, "usd": True}
    assert objective_columns([plan()]) == {"days": False, "gpu_hours": False, "usd": False}


def test_each_flag_keeps_its_value_on_its_line() -> None:
    tokens = ["A=1", "B=2", "torchrun", "--nnodes", "2", "--node-rank", "$NODE_RANK"]
    tokens += ["pretrain_gpt.py", "--bf16", "--lr", "-1e-4", "--seq-length", "4096"]
    assert flag_lines(tokens) == [
        "A=1",
        "B=2",
        "torchrun",
        "--nnodes 2",
        '--node-rank "$NODE_RANK"',
        "pretrain_gpt.py",
        "--bf16",
        "--lr -1e-4",
        "--seq-length 4096",
    ]


def test_command_is_one_flag_per_line_with_backslashes() -> None:
    p = plan(command="torchrun --nproc-per-node 8 pretrain_gpt.py --tp 2 --bf16")
    lines = launch_command(p).splitlines()
    expected = ["torchrun", "--nproc-per-node 8", "pretrain_gpt.py", "--tp 2", "--bf16"]
    assert [line.strip().removesuffix(" \\") for line in lines] == expected
    assert all(line.endswith(" \\") for line in lines[:-1]) and lines[1].startswith("    ")


def test_launch_script_stops_on_a_missing_placeholder(tmp_path: Path) -> None:
    rendezvous = "--nnodes 2 --node-rank $NODE_RANK --master-addr $MASTER_ADDR"
    p = plan(command=f"torchrun {rendezvous} pretrain_gpt.py")
    script = launch_script(p)
    assert "MASTER_ADDR=" in script and "MASTER_PORT=" not in script  # only what it uses
    path = tmp_path / "launch.sh"
    path.write_text(script)
    run = subprocess.run(
        ["bash", str(path)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert run.returncode != 0 and "set MASTER_ADDR" in run.stderr


@pytest.fixture()
def web(make_client: Callable[..., TestClient]) -> Callable[..., TestClient]:
    """A client of the service (its web pages included) with these settings."""
    return make_client


HTML = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


def test_unknown_page_is_html_for_a_browser(web: Callable[..., TestClient]) -> None:
    response = web().get("/no/such/page", headers=HTML)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert 'id="error-page"' in response.text and "Not found" in response.text
    assert "There is no page at /no/such/page" in response.text


def test_api_errors_stay_problem_json(web: Callable[..., TestClient]) -> None:
    client = web()
    assert client.get("/v1/no-such", headers=HTML).headers["content-type"].endswith("json")
    assert client.get("/no/such/page").headers["content-type"].endswith("json")  # not a browser


def test_login_is_linked_only_when_auth_is_on(web: Callable[..., TestClient]) -> None:
    assert 'href="/login"' not in web().get("/catalog/models").text
    page = web(auth="api-key", secret_key=GOOD_SECRET).get("/login")
    assert 'href="/login"' in page.text and "Sign in" in page.text


def test_cluster_catalog_uses_human_labels(web: Callable[..., TestClient]) -> None:
    html = web().get("/catalog/clusters").text
    assert "Inter-node bandwidth per GPU" in html and "Built-in" in html
    assert "inter node bandwidth bytes per s" not in html and "True" not in html


def test_a_stored_result_is_read_once_into_its_typed_answer() -> None:
    doc = plan_result_doc([{"tp": 2, "dp": 4}])
    answer, why = read_result(doc)
    assert isinstance(answer, PlanResult) and why is None
    assert views.plan_row(1, answer.plans[0])["layout"] == "TP2 PP1 DP4 mbs1"


def test_a_stored_result_with_a_renamed_field_says_so_instead_of_empty_cells() -> None:
    doc = plan_result_doc([{"tp": 2}])
    doc["plans"][0]["performance"]["tokens_per_gpu"] = doc["plans"][0]["performance"].pop(
        "tokens_per_s_per_gpu"
    )
    answer, why = read_result(doc)
    assert answer is None
    assert why is not None and "plans.0.performance" in why
