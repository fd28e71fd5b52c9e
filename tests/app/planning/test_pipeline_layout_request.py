"""A ``pipeline_layout`` no model could accept is a 422 on the field when the request is parsed
(QA fix8 item 2), not an empty plan saying "No GPU count up to 4096 fits"."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from tests.app.planning.interfaces import flags

pytestmark = pytest.mark.usefixtures("no_server_database")
runner = CliRunner()
JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16, "seq_length": 4096,
       "global_batch_size": 64}  # fmt: skip
BAD = ["0", "1234", "tt|ttL", "Et|tt"]


@pytest.mark.parametrize("layout", BAD)
def test_the_api_refuses_a_malformed_layout_naming_the_field(
    real_client: TestClient, layout: str
) -> None:
    for path, extra in (("/v1/evaluations", {"pp": 2}), ("/v1/plan-jobs", {})):
        response = real_client.post(path, json={**JOB, **extra, "pipeline_layout": layout})
        assert response.status_code == 422, (path, response.text)
        [error] = response.json()["errors"]
        assert error["field"] == "pipeline_layout" and "Et|(tt|)*30mL" in error["message"]


def test_the_cli_refuses_a_malformed_layout() -> None:
    result = runner.invoke(cli, ["plan", *flags({**JOB, "pipeline_layout": "0"})])
    assert result.exit_code != 0
    assert "pipeline_layout" in result.output or "--pipeline-layout" in result.output
    assert "repetition count" in result.output.replace("\n", " ")


def test_a_well_formed_layout_is_still_evaluated(real_client: TestClient) -> None:
    body = {**JOB, "pp": 2, "tp": 4, "pipeline_layout": "Et*16|t*16L"}
    response = real_client.post("/v1/evaluations", json=body)
    assert response.status_code == 200, response.text
