"""The job's software stack (issue 12 item 1): validation, flags, the time it changes, rows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models_db.measurement_stacks import annotate_rows, stack_notes
from planner.calibration.measurements import parse_rows
from planner.layouts import LayoutBatch
from planner.megatron.args import parse_megatron_args
from planner.megatron.flags import megatron_args
from planner.performance.profile import PerformanceProfile
from planner.performance.step_time import default_profile, estimate_performance
from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, SpecError, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

JOB = TrainingJob(seq_length=4096, global_batch_size=256)
TP8 = Layout(tp=8, pp=1, dp=8, sequence_parallel=True)


def cluster(gpu: GPUSpec = H100) -> ClusterSpec:
    return ClusterSpec(name="c", gpu=gpu, num_gpus=64, gpus_per_node=8)


def breakdown(model: ModelSpec, job: TrainingJob, layout: Layout, **coefficients: float):
    profile = default_profile(H100)
    if coefficients:
        profile = profile.with_coefficients(**coefficients)
    est = estimate_performance(model, cluster(), job, LayoutBatch.from_layouts([layout]), profile)
    return {k: float(v[0]) for k, v in est.breakdown.items()} | {"step": float(est.step_time_s[0])}


@pytest.mark.parametrize(
    ("field", "value", "hint"),
    [
        ("tp_comm_overlap", "yes", "true or false"),
        ("attention_backend", "sdpa", "auto, flash, fused, unfused"),
        ("cross_entropy_fusion", "fast", "unfused = no --cross-entropy-loss-fusion"),
        ("moe_imbalance", 0.9, "force-balanced"),
        ("moe_imbalance", float("nan"), "must be a number"),
        ("moe_grouped_gemm_kernel", "cutlass", "multi_stream"),
    ],
)
def test_bad_stack_values_name_the_field(field: str, value: object, hint: str) -> None:
    with pytest.raises(SpecError) as err:
        TrainingJob(seq_length=4096, global_batch_size=8, **{field: value})  # type: ignore[arg-type]
    assert err.value.field == field
    assert hint in str(err.value)


def test_tp_overlap_is_credited_only_where_the_job_turns_it_on() -> None:
    on = breakdown(LLAMA_8B, JOB, TP8)
    off = breakdown(LLAMA_8B, replace(JOB, tp_comm_overlap=False), TP8)
    assert off["tp_comm_s"] > 1.5 * on["tp_comm_s"]
    assert off["compute_s"] == on["compute_s"]


def test_unfused_attention_pays_the_score_traffic_and_auto_does_not() -> None:
    layout = Layout(tp=1, pp=1, dp=64)
    auto = breakdown(LLAMA_8B, JOB, layout, attention_score_bytes=12.0)
    plain = breakdown(LLAMA_8B, JOB, layout)
    unfused = breakdown(
        LLAMA_8B, replace(JOB, attention_backend="unfused"), layout, attention_score_bytes=12.0
    )
    assert auto["compute_s"] == pytest.approx(plain["compute_s"])
    assert unfused["compute_s"] > 1.02 * auto["compute_s"]


def test_cross_entropy_kernel_orders_the_last_stage() -> None:
    layout = Layout(tp=1, pp=1, dp=64)
    times = {
        impl: breakdown(
            LLAMA_8B, replace(JOB, cross_entropy_fusion=impl, megatron_core_version="0.18"), layout
        )["compute_s"]
        for impl in ("unfused", "native", "te")
    }
    assert times["unfused"] > times["native"] > times["te"]


def test_forced_balance_is_faster_and_emitted() -> None:
    layout = Layout(tp=1, pp=1, ep=8, dp=64)
    balanced = replace(JOB, moe_imbalance=1.0)
    assert (
        breakdown(MIXTRAL_8X7B, balanced, layout)["step"]
        < breakdown(MIXTRAL_8X7B, JOB, layout)["step"]
    )
    args = megatron_args(MIXTRAL_8X7B, cluster(), balanced, layout)
    assert "--moe-router-force-load-balancing" in args
    assert "--moe-router-force-load-balancing" not in megatron_args(
        MIXTRAL_8X7B, cluster(), JOB, layout
    )


@pytest.mark.parametrize(
    "job",
    [
        JOB,
        replace(JOB, tp_comm_overlap=False, attention_backend="unfused"),
        replace(
            JOB, cross_entropy_fusion="te", attention_backend="flash", megatron_core_version="0.18"
        ),
        replace(JOB, cross_entropy_fusion="unfused", attention_backend="fused"),
    ],
)
def test_stack_flags_read_back(job: TrainingJob) -> None:
    args = megatron_args(LLAMA_8B, cluster(), job, TP8)
    assert ("--tp-comm-overlap" in args) == job.tp_comm_overlap
    stack = parse_megatron_args(args, world_size=64).stack_fields
    assert stack == {
        "tp_comm_overlap": job.tp_comm_overlap,
        "attention_backend": job.attention_backend,
        "cross_entropy_fusion": job.cross_entropy_fusion,
        "moe_imbalance": job.moe_imbalance,
    }


def test_profiles_that_still_carry_moe_imbalance_load() -> None:
    data = default_profile(H100).to_dict() | {"moe_imbalance": 1.3}
    assert PerformanceProfile.from_dict(data) == default_profile(H100)


ROW = {
    "row_id": "X1", "source_id": "narayanan2021", "sweep_id": "s", "model_name": "GPT",
    "num_layers": "24", "hidden_size": "2048", "ffn_hidden_size": "8192",
    "num_attention_heads": "16", "vocab_size": "51200", "seq_length": "2048",
    "gpu_type": "H100", "num_gpus": "8", "gpus_per_node": "8", "tp": "8", "pp": "1",
    "micro_batch_size": "1", "global_batch_size": "8", "precision": "bf16",
    "recompute": "none", "sequence_parallel": "yes", "distributed_optimizer": "no",
    "tokens_per_sec_per_gpu": "1000",
}  # fmt: skip


def _parse(row: dict[str, str]):
    ms, skipped = parse_rows([row], lambda slug: H100)
    assert not skipped, skipped
    return ms[0]


def test_rows_carry_the_stack_of_their_source() -> None:
    plain = _parse(ROW)
    assert plain.job.tp_comm_overlap and plain.job.attention_backend == "auto"  # no columns
    era = _parse(annotate_rows([ROW])[0])
    assert not era.job.tp_comm_overlap
    assert era.job.attention_backend == "unfused"
    assert era.job.cross_entropy_fusion == "unfused"
    assert era.layout.cuda_graphs == "none" and era.layout.grad_reduce_dtype == "fp32"
    stated = _parse(annotate_rows([ROW | {"tp_comm_overlap": "yes", "moe_imbalance": "1.0"}])[0])
    assert stated.job.tp_comm_overlap and stated.job.moe_imbalance == 1.0  # the row wins


def test_a_bad_stack_column_skips_the_row_with_its_reason() -> None:
    _, skipped = parse_rows([ROW | {"tp_comm_overlap": "maybe"}], lambda slug: H100)
    assert "tp_comm_overlap" in skipped[0].reason
    _, skipped = parse_rows([ROW | {"attention_backend": "sdpa"}], lambda slug: H100)
    assert "attention_backend" in skipped[0].reason


def test_every_source_of_the_shared_data_is_annotated() -> None:
    sources = {n.source_id for n in stack_notes()}
    assert {"narayanan2021", "korthikanti2022", "bloom_prequel", "megatron_readme_h100",
            "nemo_perf_24.07", "dgxc_benchmarking_v25.04"} <= sources  # fmt: skip
    job, layout = TrainingJob(seq_length=8, global_batch_size=8), Layout(tp=1, pp=1, dp=1)
    for note in stack_notes():
        assert note.evidence and note.basis in ("stated", "era_default", "inferred")
        assert hasattr(job, note.field) or hasattr(layout, note.field), note.field


def test_grouped_expert_kernel_is_faster_for_fine_grained_experts_and_sets_te_env() -> None:
    """Many small experts per rank: one grouped kernel beats a cuBLAS GEMM per expert on 4
    streams (mechanisms-facts §4.2, TE PR #2045: +15 % at 16 x 2048 rows), and only the
    environment selects it (§4.1: no Megatron flag)."""
    from planner.megatron.flags import launch_spec

    layout = Layout(tp=1, pp=1, ep=8, dp=64)
    fine = replace(MIXTRAL_8X7B, num_experts=64, moe_router_topk=8, moe_ffn_hidden_size=1792)
    multi = breakdown(fine, JOB, layout)
    grouped_job = replace(JOB, moe_grouped_gemm_kernel="grouped")
    grouped = breakdown(fine, grouped_job, layout)
    assert grouped["compute_s"] < multi["compute_s"]
    env = launch_spec(fine, cluster(), grouped_job, layout).env
    assert env["NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM"] == "1"
    assert env["NVTE_USE_CUTLASS_GROUPED_GEMM"] == "1"  # Hopper, bf16
    default_env = launch_spec(fine, cluster(), JOB, layout).env
    assert "NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM" not in default_env
    dense_env = launch_spec(LLAMA_8B, cluster(), grouped_job, Layout(tp=1, pp=1, dp=64)).env
    assert "NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM" not in dense_env
