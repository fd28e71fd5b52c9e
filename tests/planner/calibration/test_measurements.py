# ruff: noqa: E501
"""Loading published measurements (planner.calibration.measurements)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from planner.calibration.measurements import gpu_slug, measurements_from_rows, parse_rows, read_rows
from planner.specs import GPUSpec
from tests.planner.fixtures import H100

GPUS = {
    "h100-sxm-80gb": H100,
    "a100-sxm4-80gb": GPUSpec(
        name="a100-sxm4-80gb",
        hbm_bytes=80 * 2**30,
        hbm_bandwidth_bytes_per_s=2.039e12,
        peak_bf16_flop_per_s=312e12,
        peak_fp8_flop_per_s=None,
        intra_node_bandwidth_bytes_per_s=300e9,
        architecture="ampere",
    ),
}
HEADER = (
    "row_id,source_id,sweep_id,model_name,num_layers,hidden_size,ffn_hidden_size,"
    "num_attention_heads,num_query_groups,vocab_size,seq_length,num_experts,moe_top_k,"
    "gpu_type,num_gpus,gpus_per_node,tp,pp,vpp,cp,ep,dp,micro_batch_size,"
    "global_batch_size,precision,recompute,sequence_parallel,distributed_optimizer,"
    "tflops_per_gpu,tflops_basis,mfu_pct,tokens_per_sec_per_gpu,step_time_s,reliability"
)
ROWS = """
R1,dgxc_benchmarking_v25.04,s1,Llama 3.1 8b,32,4096,14336,32,8,128256,8192,,,H100,8,8,1,1,,2,,4,1,128,bf16,,,,,,62.47,10682.4,12.27,high
R2,dgxc_benchmarking_v25.04,s1,Llama 3.1 8b,32,4096,14336,32,8,128256,8192,,,H100,8,8,1,1,,2,,4,1,128,fp8,,,,,,,,9.33,high
R3,dgxc_benchmarking_v25.04,s1,Nemotron4 15b,32,6144,24576,48,8,,4096,,,H100,16,8,2,1,,1,,8,2,64,bf16,,,,,,,6159.4,2.66,high
R4,narayanan2021,t1,GPT-1.7B,24,2304,9216,24,,51200,2048,,,A100-SXM4-80GB,32,8,1,1,1,1,1,32,16,512,fp16,full (uniform),no (predates SP),no,137,hardware FLOPs incl. recompute forward,,,,high
R5,narayanan2021,t1,GPT-3 175B,96,12288,49152,96,,51200,2048,,,A100-SXM4-80GB,384,8,,,,,,4,1,1536,,,,,153,hardware FLOPs,,,,high
R6,korthikanti2022,k,GPT-22B,48,6144,24576,64,,51200,2048,,,A100-SXM4-80GB,8,8,8,1,1,1,1,2,4,4,mixed,selective (attention core),yes,no,,,,,1.1,high
"""


def rows() -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(HEADER + ROWS)))


def parsed():
    return parse_rows(rows(), GPUS.__getitem__)


def test_printed_tokens_per_second_are_kept() -> None:
    ms, _ = parsed()
    r1 = next(m for m in ms if m.row_id == "R1")
    assert r1.tokens_per_s_per_gpu == pytest.approx(10682.4)
    assert r1.layout.cp == 2 and r1.layout.dp == 4 and r1.layout.vpp == 1
    assert r1.model.swiglu and r1.model.num_query_groups == 8
    assert r1.mfu == pytest.approx(0.6247)


def test_tokens_per_second_derived_from_step_time() -> None:
    ms, _ = parsed()
    r2 = next(m for m in ms if m.row_id == "R2")
    assert r2.tokens_per_s_per_gpu == pytest.approx(128 * 8192 / (9.33 * 8))
    assert r2.job.precision == "fp8"
    assert r2.derivation == "step_time"


def test_row_with_missing_vocab_is_skipped_with_a_reason() -> None:
    _, skipped = parsed()
    reasons = {s.row_id: s.reason for s in skipped}
    assert "vocab_size" in reasons["R3"]
    assert "tp" in reasons["R5"]


def test_hardware_flop_basis_uses_the_recompute_formula() -> None:
    ms, _ = parsed()
    r4 = next(m for m in ms if m.row_id == "R4")
    h, lay, s, v = 2304, 24, 2048, 51200
    per_token = 96 * lay * h * h * (1 + s / (6 * h) + v / (16 * lay * h))
    assert r4.tokens_per_s_per_gpu == pytest.approx(137e12 / per_token)
    assert r4.layout.recompute == "full"
    assert r4.layout.optimizer_sharding == "none"
    assert r4.job.precision == "bf16"  # fp16 is timed as bf16
    assert not r4.model.swiglu


def test_dp_mismatch_is_skipped() -> None:
    _, skipped = parsed()
    assert "dp=2 contradicts" in {s.row_id: s.reason for s in skipped}["R6"]


def test_free_text_defaults_follow_the_readme() -> None:
    fixed = [dict(r, dp="1") if r["row_id"] == "R6" else r for r in rows()]
    ms = measurements_from_rows(fixed, GPUS.__getitem__)
    r6 = next(m for m in ms if m.row_id == "R6")
    assert r6.layout.recompute == "selective"
    assert r6.layout.sequence_parallel is True
    r1 = next(m for m in ms if m.row_id == "R1")
    assert r1.layout.recompute == "none" and r1.layout.optimizer_sharding == "optimizer"


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("H100", "h100-sxm-80gb"),
        ("H100 (DGX-H100)", "h100-sxm-80gb"),
        ("A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("A100 40GB", "a100-sxm4-40gb"),
        ("TPU v5", None),
    ],
)
def test_gpu_type_to_slug(text: str, slug: str | None) -> None:
    assert gpu_slug(text) == slug


def test_shared_csv_loads() -> None:
    path = Path("/work/shared/data/measured-throughput.csv")
    if not path.exists():
        pytest.skip("shared data not present")
    ms, skipped = parse_rows(read_rows(path), GPUS.__getitem__)
    assert len(ms) >= 50
    assert all(m.tokens_per_s_per_gpu and m.tokens_per_s_per_gpu > 0 for m in ms)
    assert all(s.reason for s in skipped)


def test_unstated_vpp_skips_a_pipelined_row_but_not_an_unpipelined_one() -> None:
    piped = [dict(r, pp="2", tp="1", dp="2") if r["row_id"] == "R1" else r for r in rows()]
    ms, skipped = parse_rows(piped, GPUS.__getitem__)
    assert "vpp is not stated" in {s.row_id: s.reason for s in skipped}["R1"]
    stated = [dict(r, vpp="1") if r["row_id"] == "R1" else r for r in piped]
    ms, _ = parse_rows(stated, GPUS.__getitem__)
    assert next(m for m in ms if m.row_id == "R1").layout.pp == 2


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("tokens_per_sec_per_gpu", "0"),
        ("tokens_per_sec_per_gpu", "-5"),
        ("tokens_per_sec_per_gpu", "nan"),
        ("tokens_per_sec_per_gpu", "inf"),
        ("step_time_s", "0"),
        ("mfu_pct", "-1"),
        ("tflops_per_gpu", "0"),
    ],
)
def test_a_non_positive_or_non_finite_throughput_is_skipped_naming_its_column(
    column: str, value: str
) -> None:
    # a zero or negative speed has no log: it would turn the cluster's level into NaN
    row = {**rows()[0], "tokens_per_sec_per_gpu": "", "step_time_s": "", "mfu_pct": ""}
    row[column] = value
    ms, skipped = parse_rows([row], GPUS.__getitem__)
    assert ms == []
    reason = skipped[0].reason  # 'nan' and 'inf' are refused as not finite when read
    assert column in reason and ("positive" in reason or "finite" in reason)
