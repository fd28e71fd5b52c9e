"""``expandable_segments`` (issue 13): a request field in every interface, priced in memory (the
fragmentation term) and emitted in the launch script as ``PYTORCH_CUDA_ALLOC_CONF``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.planning.compute import plan_request
from app.web import forms
from planner import TrainingJob, launch_spec
from planner.specs import Layout, SpecError
from tests.app.planning.interfaces import batch_rows, evaluate_everywhere, flags
from tests.app.web.test_web import FORM, client  # noqa: F401 (fixture)
from tests.planner.fixtures import LLAMA_8B
from tests.planner.memory.test_settings import HOSTED

pytestmark = pytest.mark.usefixtures("no_server_database")
runner = CliRunner()
JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 8, "seq_length": 4096,
       "global_batch_size": 64, "tp": 2, "micro_batch_size": 1}  # fmt: skip
ENV = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def test_planner_emits_the_allocator_setting_only_when_asked() -> None:
    on = TrainingJob(seq_length=4096, global_batch_size=64, expandable_segments=True)
    spec = launch_spec(LLAMA_8B, HOSTED, on, Layout(dp=8))
    assert spec.env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert ENV in spec.command
    off = launch_spec(LLAMA_8B, HOSTED, TrainingJob(seq_length=4096, global_batch_size=64),
                      Layout(dp=8))  # fmt: skip
    assert "PYTORCH_CUDA_ALLOC_CONF" not in off.env
    with pytest.raises(SpecError, match="expandable_segments='yes' must be true or false"):
        TrainingJob(seq_length=4096, global_batch_size=64, expandable_segments="yes")  # type: ignore[arg-type]


def test_evaluation_agrees_everywhere_and_shrinks_fragmentation(
    tmp_path: Path, real_client: TestClient
) -> None:
    answer = evaluate_everywhere(real_client, {**JOB, "expandable_segments": True}, tmp_path)
    assert ENV in answer["megatron"]["command"]
    plain = real_client.post("/v1/evaluations", json=JOB).json()
    assert ENV not in plain["megatron"]["command"]
    frag = answer["memory"]["breakdown"]["fragmentation_bytes"]
    assert frag < 0.5 * plain["memory"]["breakdown"]["fragmentation_bytes"]
    bad = real_client.post("/v1/evaluations", json={**JOB, "expandable_segments": "maybe"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "expandable_segments"


def test_plan_agrees_in_cli_batch_and_service(tmp_path: Path) -> None:
    request = {**JOB, "tp": [2], "expandable_segments": True, "top_k": 2}
    service = json.loads(json.dumps(plan_request(request).raw))
    result = runner.invoke(cli, ["plan", *flags(request), "--json"])
    assert result.exit_code == 0, result.output
    rows = batch_rows(request, tmp_path)
    for a, b, r in zip(service["plans"], json.loads(result.stdout)["plans"], rows, strict=True):
        assert a["megatron"]["command"] == b["megatron"]["command"] == r["megatron_command"]
        assert ENV in r["megatron_command"]


def test_web_form_offers_it(client: TestClient) -> None:  # noqa: F811
    assert 'name="expandable_segments"' in client.get("/").text
    values = forms.form_values(
        {k: v for k, v in FORM.items() if isinstance(v, str)} | {"expandable_segments": "on"},
        {k: v for k, v in FORM.items() if isinstance(v, list)},
    )
    assert forms.to_request(values)["expandable_segments"] is True
