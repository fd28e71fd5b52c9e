"""The ``planner`` command line: evaluate, plan, catalog, batch and calibrate."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from planner.megatron.args import parse_megatron_args

runner = CliRunner()
CASE_A = ["--model", "llama3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "16",
          "--seq-length", "8192", "--global-batch-size", "128", "--tp", "2", "--pp", "2",
          "--recompute", "selective"]  # fmt: skip
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "measured-throughput.csv"


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_evaluate_json_has_the_documented_fields() -> None:
    code, out, _ = run("evaluate", *CASE_A, "--json")
    assert code == 0
    result = json.loads(out)
    assert result["valid"] is True and result["violations"] == []
    memory = result["memory"]
    assert memory["fits"] is (memory["total_bytes"] <= 0.8 * memory["capacity_bytes"])
    for term in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes"):
        assert memory["breakdown"][term] > 0
    # 8.03 B params / (tp 2 * pp 2) on the first stage, bf16 weights: about 4 GB
    assert 3.5e9 < memory["breakdown"]["weights_bytes"] < 4.5e9
    perf = result["performance"]
    assert 0 < perf["mfu"] < 1 and perf["tokens_per_s_per_gpu"] > 0
    assert sum(perf["breakdown"].values()) == pytest.approx(perf["step_time_s"], rel=1e-6)
    assert result["megatron"]["command"].startswith("CUDA_DEVICE_MAX_CONNECTIONS=1 ")


def test_evaluate_flags_parse_back_to_the_layout() -> None:
    _, out, _ = run("evaluate", *CASE_A, "--json")
    result = json.loads(out)
    parsed = parse_megatron_args(result["megatron"]["args"], world_size=16)
    assert parsed.layout.to_dict() == result["layout"]


def test_evaluate_invalid_layout_names_the_rule_and_exits_non_zero() -> None:
    code, out, _ = run("evaluate", *CASE_A[:-4], "--tp", "3", "--json")
    assert code == 1
    result = json.loads(out)
    assert result["valid"] is False
    assert any("tp=3" in v and "num_attention_heads=32" in v for v in result["violations"])


def test_evaluate_unknown_model_is_a_clear_error() -> None:
    code, _, err = run("evaluate", *CASE_A[2:], "--model", "llama3.1-8", "--json")
    assert code == 2
    assert "llama3.1-8" in err and "did you mean" in err.lower() and "--model" not in err[:7]


def test_evaluate_input_file_keeps_order_and_reports_bad_lines(tmp_path: Path) -> None:
    good = {
        "model": "llama3.1-8b",
        "gpu": "h100-sxm-80gb",
        "num_gpus": 8,
        "seq_length": 4096,
        "global_batch_size": 64,
        "tp": 2,
    }
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({**good, "tp": 8}),
        json.dumps({**good, "seq_length": 0}),
        json.dumps({**good, "gpu": "v100"}),
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = run("evaluate", "--input", str(path), "--json")
    assert code == 1  # some lines failed; the others were still evaluated and printed
    assert "3 of 5 lines" in err
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) == 5
    assert results[0]["layout"]["tp"] == 2 and results[2]["layout"]["tp"] == 8
    assert "line 2" in results[1]["error"]["message"]
    assert results[3]["error"]["field"] == "seq_length"
    assert results[3]["error"]["message"].startswith("line 4: ")
    assert results[4]["error"]["field"] == "gpu"


def test_evaluate_input_that_is_not_text_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run("evaluate", "--input", str(path), "--json")
    assert code == 2 and "not UTF-8" in err


def test_plan_json_is_ranked_and_every_plan_is_valid() -> None:
    code, out, _ = run(
        "plan",
        "--model",
        "llama3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--num-gpus",
        "16",
        "--seq-length",
        "8192",
        "--global-batch-size",
        "128",
        "--json",
    )
    assert code == 0
    result = json.loads(out)
    plans = result["plans"]
    assert plans and result["search"]["feasible"] >= len(plans)
    speeds = [p["performance"]["tokens_per_s_per_gpu"] for p in plans]
    assert speeds == sorted(speeds, reverse=True)
    for plan in plans:
        assert plan["memory"]["fits"]
        args = plan["megatron"]["args"]
        assert parse_megatron_args(args, world_size=16).layout.to_dict() == plan["layout"]


def test_plan_nothing_feasible_exits_3_with_reasons() -> None:
    code, out, _ = run(
        "plan",
        "--model",
        "llama3.1-405b",
        "--gpu",
        "a100-sxm4-40gb",
        "--num-gpus",
        "8",
        "--seq-length",
        "8192",
        "--global-batch-size",
        "64",
        "--json",
    )
    assert code == 3
    result = json.loads(out)
    assert result["plans"] == []
    assert any("memory" in reason for reason in result["rejections"])


def test_plan_fixed_axis_is_respected() -> None:
    code, out, _ = run(
        "plan",
        "--model",
        "llama3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--num-gpus",
        "16",
        "--seq-length",
        "8192",
        "--global-batch-size",
        "128",
        "--tp",
        "4",
        "--max-pp",
        "2",
        "--json",
    )
    assert code == 0
    for plan in json.loads(out)["plans"]:
        assert plan["layout"]["tp"] == 4 and plan["layout"]["pp"] <= 2


def test_catalog_list_and_show() -> None:
    code, out, _ = run("catalog", "list", "models", "--json")
    assert code == 0
    names = {row["name"] for row in json.loads(out)}
    assert {"llama3.1-405b", "deepseek-v3", "gpt-oss-120b"} <= names
    code, out, _ = run("catalog", "show", "h100-sxm-80gb", "--json")
    assert code == 0 and json.loads(out)["hbm_bytes"] > 80e9
    code, out, _ = run("catalog", "show", "h100")  # a person's view, by alias
    assert code == 0 and "hbm_bytes" in out and "GiB" in out and "nvidia-smi" in out
    code, _, err = run("catalog", "show", "h1000")
    assert code == 2 and "h1000" in err


def test_batch_writes_a_row_per_rank_and_an_error_row(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "name,model,gpu,num_gpus,gpus_per_node,seq_length,global_batch_size,top_k\n"
        "small,llama3.1-8b,h100-sxm-80gb,8,8,4096,64,2\n"
        "broken,no-such-model,h100-sxm-80gb,8,8,4096,64,2\n"
    )
    out = tmp_path / "out.csv"
    code, _, err = run("batch", str(jobs), "-o", str(out), "--workers", "1")
    assert code == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["rank"] for r in rows if r["name"] == "small"] == ["1", "2"]
    broken = [r for r in rows if r["name"] == "broken"]
    assert len(broken) == 1 and "no-such-model" in broken[0]["error"]
    assert "broken" in err


@pytest.mark.skipif(not SHARED.exists(), reason="shared measurements not beside the checkout")
def test_calibrate_reports_cross_validated_error(tmp_path: Path) -> None:
    sweeps = ("dgxc_llama_8b_bf16_weak_scaling", "dgxc_llama_70b_bf16_weak_scaling")
    with SHARED.open(newline="") as handle:  # two H100 sweeps keep the fit quick
        reader = csv.DictReader(handle)
        rows = [r for r in reader if r["sweep_id"] in sweeps]
        fields = list(reader.fieldnames or [])
    subset = tmp_path / "runs.csv"
    with subset.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "profile.json"
    start = time.perf_counter()
    code, stdout, _ = run(
        "calibrate", "--measurements", str(subset), "--json", "--output", str(out)
    )
    seconds = time.perf_counter() - start
    assert code == 0
    assert seconds < 60  # seconds, not minutes (about 2 s alone; the bound allows a busy box)
    report = json.loads(stdout)
    assert "h100-sxm-80gb" in report["gpus"]
    cv = report["gpus"]["h100-sxm-80gb"]["cross_validation"]
    assert 0 <= cv["median_ape_after"] < 1
    # one source on one GPU type: one campaign, whose 11 rows count as fewer independent ones
    noise = report["gpus"]["h100-sxm-80gb"]["fit"]["noise"]
    (campaign,) = noise["campaigns"].values()
    assert campaign["rows"] == len(rows) and 1 < campaign["effective_rows"] < len(rows) / 2
    assert "h100-sxm-80gb" in json.loads(out.read_text())


def test_calibrate_without_input_fails_clearly() -> None:
    code, _, err = run("calibrate")
    assert code == 2 and "--measurements" in err


def test_evaluate_reads_a_local_spec_file(tmp_path: Path) -> None:
    spec = {
        "name": "tiny",
        "num_layers": 4,
        "hidden_size": 512,
        "ffn_hidden_size": 2048,
        "num_attention_heads": 8,
        "vocab_size": 32000,
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(spec))
    code, out, _ = run(
        "evaluate",
        "--model",
        str(path),
        "--gpu",
        "h100-sxm-80gb",
        "--num-gpus",
        "8",
        "--seq-length",
        "1024",
        "--global-batch-size",
        "8",
        "--json",
    )
    assert code == 0 and json.loads(out)["model"] == "tiny"


def test_planning_layer_never_opens_files_named_in_a_request() -> None:
    from app.planning.compute import evaluate_request
    from planner.specs import SpecError

    request = {
        "model": "pyproject.toml",
        "gpu": "h100-sxm-80gb",
        "num_gpus": 8,
        "seq_length": 1024,
        "global_batch_size": 8,
    }
    with pytest.raises(SpecError, match="unknown model") as info:
        evaluate_request(request)
    assert info.value.field == "model"


def test_plan_requests_are_fully_validated_before_any_search() -> None:
    from app.planning.compute import validate_plan_request
    from planner.specs import SpecError

    request = {
        "model": "llama3.1-8b",
        "gpu": "h100-sxm-80gb",
        "num_gpus": 8,
        "seq_length": 4096,
        "global_batch_size": 64,
        "objective": "cost",
    }
    with pytest.raises(SpecError, match="token_budget") as info:
        validate_plan_request(request)
    assert info.value.field == "token_budget"
    model, gpu = validate_plan_request({**request, "objective": "throughput"})
    assert (model.name, gpu.name) == ("llama3.1-8b", "h100-sxm-80gb")
