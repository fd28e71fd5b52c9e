"""Fine-grained activation offload (``activation_offload_modules``) in every interface: the API,
CLI flags, ``--input`` lines, the SDK, batch CSV columns and the web form's Advanced group give
the same answer, the same flags and the same field-named errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.planning.compute import plan_request
from app.planning.schemas import PlanJobCreate
from app.web import forms
from tests.app.planning.interfaces import batch_rows, evaluate_everywhere, flags
from tests.app.web.test_web import FORM, client  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("no_server_database")
runner = CliRunner()
JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 8, "seq_length": 8192,
       "global_batch_size": 64}  # fmt: skip
LAYOUT = {"tp": 2, "micro_batch_size": 1}
MODULES = ["mlp_norm", "attn_norm"]


def test_evaluation_offload_agrees_in_api_cli_input_and_sdk(
    tmp_path: Path,
    real_client: TestClient,
) -> None:
    request = {**JOB, **LAYOUT, "activation_offload_modules": MODULES}
    answer = evaluate_everywhere(real_client, request, tmp_path)
    assert answer["layout"]["activation_offload_modules"] == ["attn_norm", "mlp_norm"]
    command = answer["megatron"]["command"]
    assert "--fine-grained-activation-offloading" in command
    assert "--offload-modules attn_norm mlp_norm" in command
    assert "NVTE_CPU_OFFLOAD_V1=1" in command
    plain = real_client.post("/v1/evaluations", json={**JOB, **LAYOUT}).json()
    acts = answer["memory"]["breakdown"]["activations_bytes"]
    assert acts < plain["memory"]["breakdown"]["activations_bytes"]


@pytest.mark.parametrize(
    ("value", "words"),
    [(["attn_proj"], "needs 'core_attn'"), (["fc1"], "attn_norm")],
)
def test_bad_offload_modules_name_the_field_in_api_and_cli(
    real_client: TestClient, value: list[str], words: str
) -> None:
    request = {**JOB, **LAYOUT, "activation_offload_modules": value}
    response = real_client.post("/v1/evaluations", json=request)
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"].startswith("activation_offload_modules") and words in error["message"]
    result = runner.invoke(cli, ["evaluate", *flags(request)])
    assert result.exit_code != 0 and "--activation-offload-modules" in result.output


def test_plan_searches_offload_alike_in_cli_batch_and_service(tmp_path: Path) -> None:
    request = {**JOB, "tp": [1], "recompute": ["none"], "search_activation_offload": True,
               "activation_offload_modules": MODULES, "top_k": 4}  # fmt: skip
    service = json.loads(json.dumps(plan_request(request).raw))
    choices = {tuple(p["layout"]["activation_offload_modules"] or ()) for p in service["plans"]}
    assert choices <= {(), ("attn_norm", "mlp_norm")}
    result = runner.invoke(cli, ["plan", *flags(request), "--json"])
    assert result.exit_code == 0, result.output
    from_cli = json.loads(result.stdout)
    rows = batch_rows(request, tmp_path)
    for a, b, r in zip(service["plans"], from_cli["plans"], rows, strict=True):
        assert a["layout"] == b["layout"]
        assert a["megatron"]["command"] == b["megatron"]["command"] == r["megatron_command"]
        assert r["activation_offload_modules"] == ",".join(
            a["layout"]["activation_offload_modules"] or []
        )


def test_web_form_posts_the_offload_modules(client: TestClient) -> None:  # noqa: F811
    html = client.get("/").text
    assert 'name="activation_offload_modules" value="expert_fc1"' in html
    assert 'name="search_activation_offload"' in html
    values: dict[str, Any] = forms.form_values(
        {k: v for k, v in FORM.items() if isinstance(v, str)} | {"search_activation_offload": "1"},
        {k: v for k, v in FORM.items() if isinstance(v, list)}
        | {"activation_offload_modules": MODULES},
    )
    req = forms.to_request(values)
    assert req["activation_offload_modules"] == MODULES and req["search_activation_offload"]
    typed = PlanJobCreate.model_validate(req)
    assert typed.activation_offload_modules == MODULES
    assert forms.values_from_request(req)["activation_offload_modules"] == MODULES
    bad = client.post("/plans", data=FORM | {"activation_offload_modules": ["attn_proj"]})
    assert bad.status_code == 422
    group = re.search(r'<fieldset class="field checks wide has-error">\s*<legend>Fine-grained'
                      r".*?</fieldset>", bad.text, flags=re.S)  # fmt: skip
    assert group is not None and "needs &#39;core_attn&#39;" in group.group(0)
