"""The web UI without JavaScript: form, POST -> 303 -> results, 422 re-render, detail, launch.sh.

The planning backend is a stand-in with canned results (tests/e2e/fake_planning.py), so these
tests check what the pages show and that the service's job queue carries the result.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app
from app.planning.reports import PerformanceRead
from app.web import forms, mount_static, router, views
from planner.specs import SpecError

_spec = importlib.util.spec_from_file_location(
    "web_fake_planning", Path(__file__).parents[2] / "e2e" / "fake_planning.py"
)
assert _spec is not None and _spec.loader is not None
fake = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake)

FORM: dict[str, Any] = {
    "model_source": "catalog",
    "model": "mixtral-8x22b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": "256",
    "gpus_per_node": "8",
    "seq_length": "4096",
    "global_batch_size": "1024",
    "precision": "bf16",
    "recompute": ["none", "selective", "full"],
    "optimizer_sharding": ["optimizer"],
    "objective": "throughput",
    "top_k": "10",
}


def build_app(data_dir: Path, gate: threading.Event | None = None) -> FastAPI:
    settings = Settings(data_dir=data_dir, job_poll_s=0.05, job_heartbeat_s=0.05)
    app = create_app(settings, backend=fake.fake_backend(gate), catalog=fake.catalog_source)
    if not any(getattr(r, "path", None) == "/plans/{job_id}" for r in app.routes):
        app.include_router(router)
    if not any(getattr(r, "path", None) == "/static" for r in app.routes):
        mount_static(app)
    return app


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(build_app(tmp_path)) as c:
        yield c


def wait_done(client: TestClient, location: str, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = client.get(f"{location}/status").text
        if 'data-status="succeeded"' in text or 'data-status="failed"' in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{location} did not finish in {timeout_s} s")


def submit(client: TestClient, **changes: Any) -> str:
    response = client.post("/plans", data=FORM | changes, follow_redirects=False)
    assert response.status_code == 303, response.text[:500]
    return str(response.headers["location"])


def field_block(html: str, name: str) -> str:
    """The markup of the form field wrapping input ``name`` (label, input, error)."""
    match = re.search(
        rf'<div class="field[^"]*">\s*<label for="{name}">.*?</div>', html, flags=re.S
    )
    assert match is not None, f"no field {name}"
    return match.group(0)


def test_home_labels_every_input(client: TestClient) -> None:
    html = client.get("/").text
    ids = re.findall(r'<(?:input|select|textarea)[^>]*\bid="([^"]+)"', html)
    labelled = set(re.findall(r'<label for="([^"]+)"', html))
    assert len(ids) > 20
    assert set(ids) <= labelled


def test_home_offers_catalog_models_and_gpus(client: TestClient) -> None:
    html = client.get("/").text
    assert '<option value="mixtral-8x22b"' in html
    assert '<option value="h100-sxm-80gb"' in html


def test_post_without_js_redirects_to_the_plan_page(client: TestClient) -> None:
    location = submit(client)
    assert re.fullmatch(r"/plans/[0-9a-f-]{36}", location)


def test_result_page_shows_ranked_plan_table(client: TestClient) -> None:
    location = submit(client)
    wait_done(client, location)
    html = client.get(location).text
    assert 'id="plans-table"' in html
    rows = re.findall(r"<tr>\s*<td>(\d+)</td>", html)
    assert rows == ["1", "2", "3"]
    # plan 1 of the canned result: tp=8, pp=4, vpp=2, dp=64/32=2; 4e6/4 s/64 GPUs tokens/s
    assert "TP8 PP4 VPP2 DP2 mbs1" in html
    assert "15,625" in html


def test_result_page_lists_rejection_reasons_in_words(client: TestClient) -> None:
    location = submit(client)
    wait_done(client, location)
    html = client.get(location).text
    assert "needs more than 80 % of HBM (memory)" in html
    assert re.search(r"tp=16 exceeds GPUs per node 8</td><td class=\"num\">10<", html)


def test_running_job_page_polls_and_refreshes_without_js(tmp_path: Path) -> None:
    gate = threading.Event()
    with TestClient(build_app(tmp_path, gate)) as c:
        location = submit(c)
        html = c.get(location).text
        gate.set()
    assert f'hx-get="{location}/status"' in html
    assert 'hx-trigger="every 500ms"' in html
    assert '<meta http-equiv="refresh"' in html


def test_bad_seq_length_rerenders_form_with_error_beside_field(client: TestClient) -> None:
    response = client.post("/plans", data=FORM | {"seq_length": "0"})
    assert response.status_code == 422
    block = field_block(response.text, "seq_length")
    # plain words, with the API's bounds (PlanJobCreate: 1 to 1,048,576)
    assert "Sequence length must be between 1 and 1,048,576." in block
    assert 'aria-invalid="true"' in block


def test_rerendered_form_keeps_the_values(client: TestClient) -> None:
    response = client.post("/plans", data=FORM | {"seq_length": "0", "num_gpus": "128"})
    assert 'value="128"' in field_block(response.text, "num_gpus")
    assert '<option value="mixtral-8x22b" selected' in response.text


def test_unknown_model_error_sits_under_the_model_picker(client: TestClient) -> None:
    response = client.post("/plans", data=FORM | {"model": "no-such-model"})
    assert response.status_code == 422
    assert "unknown model &#39;no-such-model&#39;" in field_block(response.text, "model")


def test_non_numeric_gpu_count_is_a_field_error(client: TestClient) -> None:
    response = client.post("/plans", data=FORM | {"num_gpus": "lots"})
    assert response.status_code == 422
    assert "must be a whole number" in field_block(response.text, "num_gpus")


def test_bad_pasted_config_is_an_error_under_the_textarea(client: TestClient) -> None:
    data = FORM | {"model_source": "hf_config", "hf_config": "{not json"}
    response = client.post("/plans", data=data)
    assert response.status_code == 422
    assert "not valid JSON" in field_block(response.text, "hf_config")


def test_htmx_post_returns_fragment_and_pushes_url(client: TestClient) -> None:
    response = client.post("/plans", data=FORM, headers={"HX-Request": "true"})
    assert response.status_code == 200
    # a fragment: the page's new title (htmx renames the tab with it), then the workspace
    title, rest = response.text.split("</title>", 1)
    assert re.match(r"<title>(Searching|Plans): mixtral-8x22b on 256 × h100-sxm-80gb", title)
    assert rest.lstrip().startswith('<div id="workspace"')
    assert re.fullmatch(r"/plans/[0-9a-f-]{36}", response.headers["HX-Push-Url"])


def test_detail_page_has_charts_and_command(client: TestClient) -> None:
    location = submit(client)
    wait_done(client, location)
    html = client.get(f"{location}/1").text
    assert 'id="memory-chart"' in html and 'id="time-chart"' in html
    # one flag per line: each flag keeps its value; the script name has a line of its own
    assert (
        "torchrun \\\n    --nproc-per-node 8 \\\n    pretrain_gpt.py \\\n"
        "    --tensor-model-parallel-size 8" in html
    )
    assert '"limit": 64.0' in html  # 0.8 x 80 GiB


def test_launch_script_exports_env_and_runs_torchrun(client: TestClient) -> None:
    location = submit(client)
    wait_done(client, location)
    response = client.get(f"{location}/2/launch.sh")
    assert response.headers["content-type"].startswith("text/x-shellscript")
    assert "attachment" in response.headers["content-disposition"]
    script = response.text
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in lines
    joined = re.sub(r" \\\n\s+", " ", script)  # undo the one-flag-per-line continuations
    assert (
        "\ntorchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 4 "
        '--pipeline-model-parallel-size 4 --data-path "$DATA_PATH"' in joined
    )


def test_launch_script_is_valid_bash(client: TestClient, tmp_path: Path) -> None:
    location = submit(client)
    wait_done(client, location)
    script = tmp_path / "launch.sh"
    script.write_text(client.get(f"{location}/1/launch.sh").text)
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0


def test_missing_plan_rank_is_404(client: TestClient) -> None:
    location = submit(client)
    wait_done(client, location)
    assert client.get(f"{location}/9").status_code == 404
    assert client.get("/plans/00000000-0000-0000-0000-000000000000").status_code == 404


def test_vendored_scripts_are_served_locally(client: TestClient) -> None:
    html = client.get("/").text
    for src in re.findall(r'<script src="([^"]+)"', html):
        assert src.startswith("/static/")
        assert client.get(src).status_code == 200


def test_catalog_pages_list_entries(client: TestClient) -> None:
    assert "mixtral-8x22b" in client.get("/catalog/models").text
    assert "h100-sxm-80gb" in client.get("/catalog/gpus").text
    assert "dgx-h100" in client.get("/catalog/clusters").text


def test_catalog_gpu_page_renders_memory_in_gib(client: TestClient) -> None:
    html = client.get("/catalog/gpus").text
    assert "79.6\u00a0GiB" in html  # 81 559 MiB usable, one decimal as on every page


def test_catalog_rejects_bad_config_json(client: TestClient) -> None:
    response = client.post("/catalog/models", data={"name": "x", "config_json": "[1, 2"})
    assert response.status_code == 422
    assert "not valid JSON" in response.text


@pytest.mark.parametrize("config", ["{not json", "[1, 2]"])
def test_a_failed_catalog_submit_keeps_the_name_as_typed(client: TestClient, config: str) -> None:
    """Bad JSON cleared the name field before: a failed submit loses nothing typed."""
    data = {"name": "my-model", "config_json": config, "store": "1"}
    response = client.post("/catalog/models", data=data)
    assert response.status_code == 422
    assert 'id="name" name="name" type="text" value="my-model"' in response.text
    assert "pasted-model" not in response.text


def test_layout_text_hides_unit_axes() -> None:
    layout = {
        "tp": 4,
        "pp": 2,
        "vpp": 1,
        "cp": 1,
        "ep": 8,
        "etp": None,
        "dp": 16,
        "micro_batch_size": 2,
    }
    assert views.layout_text(layout) == "TP4 PP2 EP8 DP16 mbs2"


def _performance(step_time_s: float, **parts: Any) -> PerformanceRead:
    return PerformanceRead(
        step_time_s=step_time_s, tokens_per_s_per_gpu=1.0, model_tflops_per_gpu=1.0, mfu=0.5,
        breakdown=parts.get("breakdown", {}), shares=parts.get("shares", {}),
    )  # fmt: skip


def test_shares_are_fractions_of_step_time() -> None:
    perf = _performance(
        2.0, breakdown={"compute_s": 1.2, "tp_comm_s": 0.2, "dp_comm_s": 0.1, "bubble_s": 0.5}
    )
    bubble, comm = views.shares(perf)
    assert bubble == pytest.approx(0.25)
    assert comm == pytest.approx(0.15)


def test_shares_prefer_the_planner_s_own_shares() -> None:
    perf = _performance(
        2.0,
        breakdown={"bubble_s": 0.5},
        shares={"bubble_share": 0.3, "tp_comm_share": 0.05, "ep_comm_share": 0.1,
                "compute_share": 0.55},
    )  # fmt: skip
    assert views.shares(perf) == pytest.approx((0.3, 0.15))


LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}


def test_pasted_config_can_be_added_to_the_catalog(client: TestClient) -> None:
    response = client.post(
        "/catalog/models",
        data={"name": "my-tiny-llama", "config_json": json.dumps(LLAMA_CONFIG), "store": "1"},
    )
    assert response.status_code == 200
    assert "Added <code>my-tiny-llama</code>" in response.text
    assert '<option value="my-tiny-llama"' in client.get("/").text


def test_parsed_config_shows_megatron_fields(client: TestClient) -> None:
    response = client.post(
        "/catalog/models", data={"name": "tiny", "config_json": json.dumps(LLAMA_CONFIG)}
    )
    spec = dict(re.findall(r'<th scope="row">(\w+)</th><td><code>([^<]*)</code>', response.text))
    assert spec["num_layers"] == "22"
    assert spec["ffn_hidden_size"] == "5632"
    assert spec["num_query_groups"] == "4"


def test_calibration_fits_the_shared_measurements(client: TestClient) -> None:
    path = Path("/work/shared/data/measured-throughput.csv")
    if not path.exists():
        pytest.skip("the shared measurements are not on this machine")
    body = path.read_bytes()
    response = client.post(
        "/calibration",
        data={"cluster": "dgx-h100"},
        files={"file": ("runs.csv", body, "text/csv")},
    )
    assert response.status_code == 200
    n = int(re.search(r"Fit on (\d+) measured runs of h100", response.text).group(1))
    chart = json.loads(
        re.search(r'data-chart-for="calibration-chart">(.*?)</script>', response.text).group(1)
    )
    assert n >= 10
    assert len(chart["before"]) == len(chart["after"]) == n


def test_calibration_rejects_a_file_that_is_not_a_log(client: TestClient) -> None:
    response = client.post(
        "/calibration",
        data={"cluster": "dgx-h100"},
        files={"file": ("train.log", b"hello world", "text/plain")},
    )
    assert response.status_code == 422
    assert 'id="file-error"' in response.text
    assert "Megatron-LM log" in response.text


def test_node_count_becomes_gpu_count() -> None:
    values = FORM | {"num_gpus": "", "num_nodes": "4", "gpus_per_node": "4"}
    assert forms.to_request(values)["num_gpus"] == 16


def test_moe_switches_default_to_the_planner_and_pass_through_when_set() -> None:
    req = forms.to_request(FORM)
    assert "moe_a2a_overlap" not in req and "moe_dispatcher" not in req
    req = forms.to_request(FORM | {"moe_a2a_overlap": "off", "moe_dispatcher": "flex"})
    assert (req["moe_a2a_overlap"], req["moe_dispatcher"]) == (False, "flex")
    with pytest.raises(SpecError) as err:
        forms.to_request(FORM | {"moe_dispatcher": "nccl"})
    assert err.value.field == "moe_dispatcher"


def test_pasted_config_runs_as_an_inline_model(client: TestClient) -> None:
    data = FORM | {"model_source": "hf_config", "hf_config": json.dumps(LLAMA_CONFIG)}
    location = submit(client, **data)
    wait_done(client, location)
    html = client.get(location).text
    assert 'id="plans-table"' in html
    assert "&#34;num_layers&#34;: 22" in html  # the form shows the spec it ran with
