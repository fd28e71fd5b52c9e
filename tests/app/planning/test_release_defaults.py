"""Old Megatron-Core releases are planned without stating a stack field (QA fix8 item 1): the
defaults they lack (``cross_entropy_fusion='native'`` needs core 0.8) are lowered and said so in
the notes; a setting the user states that the release lacks is still a 422 naming it."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from tests.app.planning.interfaces import flags

runner = CliRunner()
JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16, "seq_length": 4096,
       "global_batch_size": 64}  # fmt: skip
LAYOUT = {"tp": 4, "micro_batch_size": 1}
OLD = ("0.4", "0.5", "0.7", "24.05")


def _lowered(notes: list[str]) -> bool:
    return any(n.startswith("cross_entropy_fusion='unfused', not the default") for n in notes)


@pytest.mark.usefixtures("no_server_database")
@pytest.mark.parametrize("release", OLD)
def test_an_old_release_plans_and_evaluates_through_the_api(
    real_client: TestClient, release: str
) -> None:
    client = real_client
    body = {**JOB, "megatron_core_version": release}
    evaluation = client.post("/v1/evaluations", json={**body, **LAYOUT})
    assert evaluation.status_code == 200, evaluation.text
    launch = evaluation.json()["megatron"]
    assert "--cross-entropy-loss-fusion" not in launch["command"] and _lowered(launch["notes"])
    job = client.post("/v1/plan-jobs?wait=60", json=body)
    assert job.status_code == 200 and job.json()["status"] == "succeeded", job.text
    best = client.get(f"/v1/plan-jobs/{job.json()['id']}/plans").json()["plans"][0]
    assert best["run"]["cross_entropy_fusion"] == "unfused"
    assert "--cross-entropy-loss-fusion" not in best["megatron"]["command"]
    assert _lowered(best["megatron"]["notes"])


@pytest.mark.usefixtures("no_server_database")
@pytest.mark.parametrize("command", ["plan", "evaluate"])
def test_an_old_release_plans_and_evaluates_from_the_cli(command: str) -> None:
    request = {**JOB, **(LAYOUT if command == "evaluate" else {}), "megatron_core_version": "0.7"}
    result = runner.invoke(cli, [command, *flags(request), "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    launch = answer["plans"][0]["megatron"] if command == "plan" else answer["megatron"]
    assert "--cross-entropy-loss-fusion" not in launch["command"] and _lowered(launch["notes"])


@pytest.mark.usefixtures("no_server_database")
def test_the_newest_release_keeps_the_recommended_default(real_client: TestClient) -> None:
    answer = real_client.post("/v1/evaluations", json={**JOB, **LAYOUT}).json()
    assert "--cross-entropy-loss-fusion" in answer["megatron"]["command"]
    assert not _lowered(answer["megatron"]["notes"])


@pytest.mark.usefixtures("no_server_database")
def test_a_stated_setting_the_release_lacks_is_still_a_422(real_client: TestClient) -> None:
    body = {**JOB, **LAYOUT, "megatron_core_version": "0.7", "cross_entropy_fusion": "native"}
    for path in ("/v1/evaluations", "/v1/plan-jobs"):
        response = real_client.post(path, json=body)
        assert response.status_code == 422, (path, response.text)
        error = response.json()["errors"][0]
        assert error["field"] == "cross_entropy_fusion", error
        assert (
            "Megatron-Core >= 0.8" in error["message"] and "Megatron-Core 0.7" in error["message"]
        )
    result = runner.invoke(cli, ["evaluate", *flags(body)])
    assert result.exit_code != 0 and "cross_entropy_fusion" in result.output
