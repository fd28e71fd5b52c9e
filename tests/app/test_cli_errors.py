"""Foreseeable failures of every ``planner`` command: one line saying what to do, a non-zero
exit, no traceback (app/cli/errors.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.cli.errors import explain
from app.sdk import PlannerAPIError, PlannerClient

ROOT = Path(__file__).resolve().parents[2]
JOB = ["--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "16",
       "--seq-length", "8192", "--global-batch-size", "128"]  # fmt: skip


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_submit_against_a_closed_port_is_a_few_lines_and_no_traceback() -> None:
    """As a user runs it: the real ``planner`` entry point in a subprocess."""
    url = f"http://127.0.0.1:{_closed_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "submit", "--server", url, *JOB],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = (done.stdout + done.stderr).strip()
    assert done.returncode != 0
    assert "Traceback" not in output
    assert len(output.splitlines()) <= 3, output
    assert f"cannot reach the planner service at {url}" in output
    assert "planner serve" in output  # what to do


@pytest.mark.parametrize(
    "args",
    [
        ["scale", "--num-gpus", "16-64"],
        ["batch", str(ROOT / "examples" / "jobs.csv"), "-o", "/tmp/never-written.csv"],
        ["result", "some-job-id"],
    ],
)
def test_every_server_command_words_a_refused_connection(args: list[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    extra = JOB[:4] + JOB[6:] if args[0] == "scale" else []
    code, _, err = run(*args, *extra, "--server", url)
    assert code != 0
    assert "cannot reach the planner service" in err and "Traceback" not in err


def _problem(status: int, detail: str, **more: Any) -> PlannerAPIError:
    return PlannerAPIError(status, {"detail": detail, **more})


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (_problem(401, "an API key is required"), ["--api-key", "X-API-Key", "keys create"]),
        (_problem(403, "needs scope plan"), ["scope", "--scopes plan"]),
        (_problem(429, "slow down"), ["retry"]),
        (_problem(500, "boom", request_id="r-1"), ["see its log", "r-1"]),
        (
            _problem(422, "bad", errors=[{"field": "num_gpus", "message": "x"}]),
            ["HTTP 422: bad", "field: num_gpus"],
        ),
        (httpx.ReadTimeout("timed out"), ["did not answer in time", "/healthz"]),
        (TimeoutError("plan job j is still running after 5 s"), ["--wait-timeout"]),
        (FileNotFoundError(2, "No such file or directory", "x.csv"), ["cannot open x.csv"]),
    ],
)
def test_explain_says_what_to_do(exc: BaseException, words: list[str]) -> None:
    explained = explain(exc)
    assert explained is not None and explained.exit_code != 0
    for word in words:
        assert word in explained.message, explained.message
    assert "\n" not in explained.message


def test_database_errors_name_the_setting_and_mask_the_password() -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.exc import OperationalError

    engine = create_engine("sqlite:////nonexistent-dir/x/planner.db")
    with pytest.raises(OperationalError) as info:
        engine.connect()
    explained = explain(info.value)
    assert explained is not None and "PLANNER_DATABASE_URL" in explained.message


def test_a_bug_is_not_hidden() -> None:
    assert explain(RuntimeError("a bug")) is None
    assert explain(KeyError("x")) is None


def test_bad_key_on_a_live_command_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: PlannerClient, *args: Any, **kwargs: Any) -> Any:
        raise _problem(401, "missing or invalid API key")

    monkeypatch.setattr(PlannerClient, "submit_plan", refuse)
    code, out, err = run("submit", *JOB, "--api-key", "pp_000000000000_wrong")
    assert code != 0 and out == ""
    assert "X-API-Key" in err and len(err.strip().splitlines()) == 1


def test_submit_without_wait_prints_the_exact_fetch_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(PlannerClient, "submit_plan", lambda self, request, **kw: {"id": "job-123"})
    code, out, err = run("submit", *JOB, "--server", "http://127.0.0.1:9000", "--api-key", "k")
    assert code == 0
    assert out.strip() == "queued plan job job-123"
    assert (
        "planner result job-123 --server http://127.0.0.1:9000 --api-key $PLANNER_API_KEY --wait"
        in err
    )
    assert " k " not in err  # the key itself is never echoed


def test_result_of_a_running_job_says_to_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        PlannerClient, "get_job", lambda self, job_id: {"id": job_id, "status": "running",
                                                        "progress": 0.5}
    )  # fmt: skip
    code, _, err = run("result", "job-9")
    assert code == 1
    assert "job-9 is running (50 %)" in err and "--wait" in err


def test_result_prints_the_plans_of_a_finished_job(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.app.batches.test_batches import full_plan
    from tests.support.reports import plan_result_doc

    plans = {**plan_result_doc([], evaluated=3, feasible=1), "plans": [full_plan(1, 8)]}
    monkeypatch.setattr(
        PlannerClient, "get_job", lambda self, job_id: {"id": job_id, "status": "succeeded"}
    )
    from app.planning.reports import PlanResult

    typed = PlanResult.model_validate(plans)  # the SDK returns typed results
    monkeypatch.setattr(PlannerClient, "get_plans", lambda self, job_id: typed)
    code, out, _ = run("result", "job-9", "--json")
    assert code == 0 and json.loads(out)["plans"][0]["layout"]["tp"] == 8


@pytest.mark.parametrize("model", ["./missing-model.json", "specs/nope.yaml"])
def test_a_model_file_that_does_not_exist_is_said_so(model: str) -> None:
    """It read "--model must be a catalog slug ... (got './missing-model.json')" before."""
    code, _, err = run("plan", *JOB[2:], "--model", model)
    assert code == 2
    assert f"cannot read {model}: no such file" in err and "--model" in err
    assert "Traceback" not in err


def test_a_missing_jobs_file_names_the_argument_not_an_option(tmp_path: Path) -> None:
    code, _, err = run("batch", str(tmp_path / "none.csv"), "-o", str(tmp_path / "out.csv"))
    assert code == 2
    assert "cannot read" in err and "(field: JOBS)" in err and "--jobs" not in err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "has no measurement rows"),
        (b"{not a csv", "has no measurement rows"),
        (b"model,tp\n", "has no measurement rows"),
        (b"\xff\xfe\x00binary", "is not UTF-8 text"),
    ],
)
def test_a_measurements_file_without_rows_is_named(
    tmp_path: Path, content: bytes, said: str
) -> None:
    """Each said "no measurement rows in the request" before, or read binary as text."""
    path = tmp_path / "runs.csv"
    path.write_bytes(content)
    code, _, err = run("calibrate", "--measurements", str(path))
    assert code == 2
    assert f"{path} {said}" in err and "--measurements" in err


@pytest.mark.parametrize("command", [["migrate"], ["keys", "list"]])
def test_a_bad_setting_is_one_line_naming_the_variable_not_its_value(
    command: list[str], tmp_path: Path
) -> None:
    """A traceback from pydantic-settings before."""
    env = {"PLANNER_RATE_LIMIT_PER_S": "s3cret-token", "PLANNER_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(cli, command, env=env)
    assert result.exit_code == 2, result.output
    assert "PLANNER_RATE_LIMIT_PER_S" in result.stderr and "Traceback" not in result.output
    assert "s3cret" not in result.output + result.stderr
