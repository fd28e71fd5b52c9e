"""One request, one path: the CLI (``--input`` lines and flags), the API and the SDK answer the
same question with the same numbers, and refuse the same bad input (issue 11)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.core.settings import Settings
from app.main import create_app
from app.planning.schemas import EvaluationRequest
from app.sdk import PlannerAPIError, PlannerClient

JOB_8B = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16, "seq_length": 4096,
          "global_batch_size": 128}  # fmt: skip
LAYOUTS: list[dict[str, Any]] = [
    {**JOB_8B, "tp": 2, "pp": 2, "recompute": "selective"},
    {"model": "llama3.1-70b", "gpu": "h100-sxm-80gb", "num_gpus": 64, "seq_length": 8192,
     "global_batch_size": 128, "tp": 8, "pp": 4, "vpp": 5, "recompute": "selective"},
    {"model": "mixtral-8x7b", "gpu": "h200-sxm-141gb", "num_gpus": 16, "seq_length": 4096,
     "global_batch_size": 256, "tp": 2, "ep": 8, "micro_batch_size": 1},
]  # fmt: skip
runner = CliRunner()


@pytest.fixture(scope="module")
def real_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The service with the real planner and catalog on a fresh SQLite database."""
    folder = tmp_path_factory.mktemp("one-request")
    settings = Settings(data_dir=folder, database_url=f"sqlite:///{folder}/planner.db", workers=0)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def sdk(real_client: TestClient) -> Iterator[PlannerClient]:
    # the TestClient's transport calls the app in-process: the SDK's real HTTP code path
    with PlannerClient("http://testserver", transport=real_client._transport) as client:
        yield client


@pytest.fixture(autouse=True)
def no_server_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI must not find (or create) a service database of the machine running the tests."""
    monkeypatch.setenv("PLANNER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("PLANNER_DATABASE_URL", raising=False)


def cli_lines(tmp_path: Path, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    result = runner.invoke(cli, ["evaluate", "--input", str(path), "--json"])
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_cli_api_and_sdk_give_identical_numbers(
    tmp_path: Path, real_client: TestClient, sdk: PlannerClient
) -> None:
    from_cli = cli_lines(tmp_path, LAYOUTS)
    for request, cli_result in zip(LAYOUTS, from_cli, strict=True):
        response = real_client.post("/v1/evaluations", json=request)
        assert response.status_code == 200, response.text
        from_api = response.json()
        from_sdk = sdk.evaluate(EvaluationRequest.model_validate(request)).raw
        assert cli_result.pop("line") >= 1
        assert cli_result == from_api == from_sdk
        assert from_api["performance"]["tokens_per_s_per_gpu"] > 0
    assert from_cli[2]["layout"]["ep"] == 8  # the MoE layout kept its expert parallelism


def test_cli_flags_give_the_numbers_of_the_input_line(tmp_path: Path) -> None:
    flags = ["--model", "llama3.1-8b", "--gpu", "h100", "--num-gpus", "16", "--seq-length",
             "4096", "--global-batch-size", "128", "--tp", "2", "--pp", "2", "--recompute",
             "selective"]  # fmt: skip
    result = runner.invoke(cli, ["evaluate", *flags, "--json"])
    assert result.exit_code == 0, result.stderr
    line = cli_lines(tmp_path, LAYOUTS[:1])[0]
    line.pop("line")
    assert json.loads(result.stdout) == line  # the alias h100 is h100-sxm-80gb


BAD = [
    ({**JOB_8B, "colour": "blue"}, "colour", "unknown field"),
    ({**JOB_8B, "model": "llama3.1-8"}, "model", "did you mean"),
    ({**JOB_8B, "gpu": "h10"}, "gpu", "did you mean h100-sxm-80gb"),
    ({**JOB_8B, "cluster": "no-such-cluster"}, "cluster", "unknown cluster"),
    ({**JOB_8B, "cluster": "dgx-h10"}, "cluster", "did you mean dgx-h100"),
    ({**JOB_8B, "num_gpus": 70_000}, "num_gpus", "less than or equal to 65536"),
]


@pytest.mark.parametrize(("request_body", "field", "words"), BAD)
def test_bad_input_is_an_error_in_every_interface(
    tmp_path: Path,
    real_client: TestClient,
    sdk: PlannerClient,
    request_body: dict[str, Any],
    field: str,
    words: str,
) -> None:
    response = real_client.post("/v1/evaluations", json=request_body)
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["field"] == field
    assert words in problem["detail"]
    with pytest.raises(PlannerAPIError, match=words) as caught:
        sdk.evaluate(request_body)
    assert caught.value.errors[0]["field"] == field
    (line,) = cli_lines(tmp_path, [request_body])
    assert line["error"]["field"] == field
    assert words in line["error"]["message"] and line["error"]["message"].startswith("line 1: ")


def test_cli_names_the_flag_not_the_field() -> None:
    result = runner.invoke(
        cli, ["plan", "--model", "llama3.1-8b", "--gpu", "h100", "--num-gpus", "64-100000",
              "--seq-length", "4096", "--global-batch-size", "128"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--num-gpus" in result.stderr and "num_gpus_options" not in result.stderr


def test_plan_on_a_cluster_preset() -> None:
    result = runner.invoke(
        cli, ["plan", "--cluster", "dgx-h100", "--model", "llama3.1-8b", "--num-gpus", "16",
              "--seq-length", "4096", "--global-batch-size", "128", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    plans = json.loads(result.stdout)
    assert plans["gpu"] == "h100-sxm-80gb" and plans["plans"]
    best = plans["plans"][0]["layout"]
    assert best["tp"] * best["pp"] * best["cp"] * best["dp"] == 16


def test_profile_file_changes_the_prediction(tmp_path: Path) -> None:
    from models_db.catalog import load_gpu
    from models_db.profiles import load_profile

    data = load_profile(load_gpu("h100-sxm-80gb")).to_dict()
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"h100-sxm-80gb": data}), encoding="utf-8")
    flags = [part for k, v in JOB_8B.items() for part in (f"--{k.replace('_', '-')}", str(v))]
    base = ["evaluate", *flags, "--tp", "2", "--json"]
    default = json.loads(runner.invoke(cli, base).stdout)
    same = json.loads(runner.invoke(cli, [*base, "--profile", str(path)]).stdout)
    assert same == default  # the shipped profile, read back from a file: the same numbers
    missing = runner.invoke(cli, [*base, "--profile", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2 and "--profile" in missing.stderr
