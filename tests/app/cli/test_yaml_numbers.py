"""Numbers in the YAML files the CLI reads (jobs, model specs) are plain decimal or refused
with the key named, before anything is planned (YAML 1.1 read ``1_000`` as 1000)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from app.batches.jobs_file import batch_job
from app.cli import cli
from app.cli.batch import read_jobs

JOB = "  - model: llama3.1-8b\n    gpu: h100-sxm-80gb\n    seq_length: 4096\n"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, " ".join(result.stderr.split())


def test_an_underscored_number_in_a_jobs_file_is_refused_naming_the_key(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(f"jobs:\n{JOB}    num_gpus: 1_000\n    global_batch_size: 64\n")
    out = tmp_path / "plans.csv"
    code, err = run("batch", str(jobs), "-o", str(out))
    assert code == 2
    assert "key 'num_gpus'" in err and "'1_000' is not a plain number" in err
    assert not out.exists()  # refused before planning


def test_plain_numbers_and_an_exponent_float_are_read(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yml"
    jobs.write_text(f"jobs:\n{JOB}    num_gpus: 1000\n    global_batch_size: 1e3\n"
                    "    memory_threshold: 8e-1\n")  # fmt: skip
    [job] = read_jobs(jobs)
    assert job["num_gpus"] == 1000 and job["memory_threshold"] == 0.8
    assert batch_job(job)["memory_threshold"] == 0.8  # the request takes the float


def evaluate_spec(path: Path, text: str) -> tuple[int, str]:
    path.write_text(text)
    return run("evaluate", "--model", str(path), "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
               "--seq-length", "4096", "--global-batch-size", "8")  # fmt: skip


def test_an_underscored_number_in_a_model_spec_is_refused_naming_the_key(tmp_path: Path) -> None:
    spec = "name: tiny\nnum_layers: 3_2\nhidden_size: 1024\n"
    code, err = evaluate_spec(tmp_path / "model.yaml", spec)
    assert code == 2
    assert "key 'num_layers' (line 2)" in err and "'3_2'" in err


def test_a_model_spec_that_is_not_yaml_is_one_line(tmp_path: Path) -> None:
    code, err = evaluate_spec(tmp_path / "model.yaml", "name: tiny\nnum_layers: [1\n")
    assert code == 2
    assert "is not valid YAML" in err
