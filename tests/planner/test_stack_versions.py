"""The job's Megatron-Core / Transformer Engine releases (issue 12 item 1): parsing, the
availability table, and the launch flags spelled for each release."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner.megatron.args import parse_megatron_args
from planner.megatron.flags import launch_spec, megatron_args
from planner.specs import ClusterSpec, Layout, SpecError, TrainingJob
from planner.stack_versions import CORE_VERSIONS, TE_VERSIONS, features, missing
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

JOB = TrainingJob(seq_length=4096, global_batch_size=256)
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64, gpus_per_node=8)


def job(core: str | None = None, te: str | None = None, **kw: object) -> TrainingJob:
    return replace(JOB, megatron_core_version=core, te_version=te, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "stored"),
    [("0.12", "0.12"), ("0.12.1", "0.12"), ("core_v0.15.0", "0.15"), ("v0.9", "0.9"),
     ("0.11.0rc0", "0.11"), (None, None)],
)  # fmt: skip
def test_core_versions_are_stored_as_major_minor(given: str | None, stored: str | None) -> None:
    assert job(given).megatron_core_version == stored


def test_a_nemo_container_tag_stands_for_its_core_and_te() -> None:
    j = job("24.09")
    assert (j.megatron_core_version, j.te_version) == ("0.9", "1.10")
    assert job("24.07", "2.5").te_version == "2.5"  # a TE given keeps its value


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [("megatron_core_version", "0.3", "use 0.4 to 0.19"),
     ("megatron_core_version", "0.20", "leave it unset for the newest (0.19)"),
     ("megatron_core_version", "latest", "write major.minor"),
     ("te_version", "1.15", "1.0 to 1.14, 2.0 to 2.18"),
     ("te_version", "3.0", "Transformer Engine release")],
)  # fmt: skip
def test_bad_versions_name_the_field_and_the_range(field: str, value: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        TrainingJob(seq_length=4096, global_batch_size=8, **{field: value})  # type: ignore[arg-type]
    assert err.value.field == field and words in err.value.message


def test_every_row_of_the_table_cites_a_source_and_known_releases() -> None:
    rows = features()
    assert len({(f.setting, f.value) for f in rows}) == len(rows)
    for f in rows:
        assert f.source.startswith("mechanisms-facts §"), f
        for v in (f.min_core, f.max_core):
            assert v is None or f"{v[0]}.{v[1]}" in CORE_VERSIONS, f
        assert f.min_te is None or f"{f.min_te[0]}.{f.min_te[1]}" in TE_VERSIONS, f


@pytest.mark.parametrize(
    ("setting", "value", "core", "te", "lacks"),
    [("cp_comm_type", "a2a", "0.10", "1.11", None),
     ("cp_comm_type", "a2a", "0.9", "1.11", "Megatron-Core >= 0.10"),
     ("cp_comm_type", "a2a", "0.10", "1.10", "Transformer Engine >= 1.11"),
     ("cuda_graphs", "full_iteration", "0.13", None, "Megatron-Core >= 0.14"),
     ("cuda_graphs", "partial_moe", "0.15", None, "Megatron-Core >= 0.16"),
     ("activation_offload_modules", "on", "0.15", None, "Megatron-Core >= 0.16"),
     ("moe_dispatcher", "flex", "0.11", None, "Megatron-Core >= 0.12"),
     ("moe_a2a_overlap", "true", "0.13", None, "Megatron-Core >= 0.14"),
     ("fp8_recipe", "mxfp8", "0.12", "1.13", "Transformer Engine >= 2.0"),
     ("cross_entropy_fusion", "te", None, None, "<= 0.18")],
)  # fmt: skip
def test_availability_follows_the_table(
    setting: str, value: str, core: str | None, te: str | None, lacks: str | None
) -> None:
    found = missing(job(core, te, cross_entropy_fusion="unfused"), setting, value)
    assert (found is None) if lacks is None else (lacks in (found or ""))


def test_job_wide_settings_the_stack_lacks_are_refused_up_front() -> None:
    with pytest.raises(SpecError, match=r"needs Megatron-Core >= 0\.12, <= 0\.18") as err:
        job("0.19", cross_entropy_fusion="te")
    assert err.value.field == "cross_entropy_fusion"
    assert job("0.18", cross_entropy_fusion="te").cross_entropy_fusion == "te"
    with pytest.raises(SpecError, match=r"Transformer Engine >= 2\.8") as err:
        job(None, "2.7", moe_grouped_gemm_kernel="grouped")
    assert err.value.field == "moe_grouped_gemm_kernel"


GRAPHS_MOE = Layout(tp=1, ep=8, dp=64, cuda_graphs="partial")
FULL = Layout(tp=1, dp=64, cuda_graphs="full_iteration")


@pytest.mark.parametrize(
    ("model", "layout", "core", "present", "absent"),
    [(MIXTRAL_8X7B, GRAPHS_MOE, "0.19", "--cuda-graph-modules attn moe_router moe_preprocess",
      "--cuda-graph-scope"),
     (MIXTRAL_8X7B, GRAPHS_MOE, "0.17", "--cuda-graph-scope attn moe_router moe_preprocess",
      "--cuda-graph-modules"),
     (LLAMA_8B, Layout(tp=1, dp=64, cuda_graphs="partial"), "0.13", "--external-cuda-graph",
      "--cuda-graph-impl"),
     (LLAMA_8B, FULL, "0.18", "--cuda-graph-impl full_iteration", "--cuda-graph-scope"),
     (LLAMA_8B, FULL, "0.16", "--cuda-graph-impl local --cuda-graph-scope full_iteration",
      "--cuda-graph-modules"),
     (LLAMA_8B, FULL, "0.14", "--enable-cuda-graph --cuda-graph-scope full_iteration",
      "--cuda-graph-impl"),
     (MIXTRAL_8X7B, Layout(tp=1, ep=8, dp=64, moe_dispatcher="flex"), "0.16",
      "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep",
      "--moe-enable-deepep"),
     (MIXTRAL_8X7B, Layout(tp=1, ep=8, dp=64, moe_dispatcher="flex"), "0.15",
      "--moe-token-dispatcher-type flex --moe-enable-deepep", "--moe-flex-dispatcher-backend"),
     (LLAMA_8B, Layout(tp=1, pp=4, vpp=2, dp=16), "0.11",
      "--num-layers-per-virtual-pipeline-stage 4", "--num-virtual-stages-per-pipeline-rank"),
     (LLAMA_8B, Layout(tp=1, pp=4, vpp=2, dp=16), "0.12",
      "--num-virtual-stages-per-pipeline-rank 2", "--num-layers-per-virtual-pipeline-stage")],
)  # fmt: skip
def test_flags_are_spelled_for_the_release_and_parse_back(
    model: object, layout: Layout, core: str, present: str, absent: str
) -> None:
    j = job(core)
    args = megatron_args(model, CLUSTER, j, layout)  # type: ignore[arg-type]
    line = " ".join(args)
    assert present in line and absent not in line
    parsed = parse_megatron_args(args, world_size=64).layout
    assert (parsed.cuda_graphs, parsed.vpp) == (layout.cuda_graphs, layout.vpp)
    if layout.moe_dispatcher:
        assert parsed.moe_dispatcher == layout.moe_dispatcher


FLAG_RELEASES = {
    "--cp-comm-type": ((0, 10), None), "--cuda-graph-modules": ((0, 18), None),
    "--cuda-graph-impl": ((0, 15), None), "--cuda-graph-scope": ((0, 12), (0, 17)),
    "--external-cuda-graph": ((0, 12), (0, 14)), "--enable-cuda-graph": ((0, 11), (0, 14)),
    "--moe-flex-dispatcher-backend": ((0, 16), None), "--moe-enable-deepep": ((0, 12), (0, 15)),
    "--fp8-recipe": ((0, 12), None), "--overlap-moe-expert-parallel-comm": ((0, 14), None),
    "--num-virtual-stages-per-pipeline-rank": ((0, 12), None),
    "--cross-entropy-loss-fusion": ((0, 8), None), "--fp8-param-gather": ((0, 9), None),
    "--account-for-embedding-in-pipeline-split": ((0, 11), None),
    "--account-for-loss-in-pipeline-split": ((0, 11), None),
    "--decoder-first-pipeline-num-layers": ((0, 9), None),
    "--decoder-last-pipeline-num-layers": ((0, 9), None),
    "--pipeline-model-parallel-layout": ((0, 13), None), "--recompute-modules": ((0, 12), None),
    "--moe-permute-fusion": ((0, 11), None),
    "--attention-backend": ((0, 11), None),  # megatron-core 0.11.0's AttnBackend (loose9)
}  # fmt: skip
"""First (and last) core release with each flag: mechanisms-facts §7-8, written out independently
of the table the planner reads so that the two check each other."""


@pytest.mark.parametrize("core", CORE_VERSIONS[5:])  # 0.9 ... 0.19
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_no_emitted_flag_is_foreign_to_the_release(core: str, precision: str) -> None:
    """Whatever the planner emits by itself for MoE and dense layouts exists in the release."""
    j = job(core, precision=precision)
    version = tuple(int(x) for x in core.split("."))
    layouts = [(MIXTRAL_8X7B, Layout(tp=1, pp=2, vpp=2, ep=8, dp=32)),
               (LLAMA_8B, Layout(tp=2, pp=4, vpp=2, dp=8))]  # fmt: skip
    for model, layout in layouts:
        spec = launch_spec(model, CLUSTER, j, layout)
        for flag in spec.args:
            first, last = FLAG_RELEASES.get(flag, ((0, 4), None))
            assert version >= first and (last is None or version <= last), (core, flag)
        assert f"Megatron-Core {core}" in " ".join(spec.notes)


def test_the_grouped_kernel_switches_follow_the_te_release() -> None:
    layout = Layout(tp=1, ep=8, dp=64)
    env = launch_spec(MIXTRAL_8X7B, CLUSTER, job(None, "2.9", moe_grouped_gemm_kernel="grouped"),
                      layout).env  # fmt: skip
    assert env.get("NVTE_USE_CUTLASS_GROUPED_GEMM") == "1"
    assert "NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM" not in env  # cuBLASLt path: TE 2.13
    newest = launch_spec(MIXTRAL_8X7B, CLUSTER, job(moe_grouped_gemm_kernel="grouped"), layout)
    assert newest.env.get("NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM") == "1"
    default = launch_spec(MIXTRAL_8X7B, CLUSTER, JOB, layout).env
    assert not any(k.startswith("NVTE_") for k in default)


# --- the pipeline split a release can build (mechanisms-facts §7; megatron-facts rules 8-13) ----

LLAMA_126 = replace(LLAMA_8B, name="llama-126-layers", num_layers=126)  # Llama-3.1-405B's depth
C2048 = ClusterSpec(name="c", gpu=H100, num_gpus=1024, gpus_per_node=8)


def test_the_account_split_before_core_0_12_counts_the_embedding_and_loss_per_virtual_stage() -> (
    None
):
    # dgxc's 405B layout, pp 8 x vpp 8: (126 + 2) / 64 = 2 layers per virtual stage (rule 9)
    layout = Layout(tp=8, pp=8, vpp=8, dp=16)
    args = launch_spec(LLAMA_126, C2048, job("0.11"), layout).args
    assert "--account-for-embedding-in-pipeline-split" in args
    assert args[args.index("--num-layers-per-virtual-pipeline-stage") + 1] == "2"
    assert "--num-virtual-stages-per-pipeline-rank" not in args  # core 0.12
    assert parse_megatron_args(args, world_size=1024).layout.vpp == 8


def test_a_split_the_release_lacks_is_refused_naming_the_flags_and_release() -> None:
    from planner.space.rules import violations

    (message,) = violations(LLAMA_126, C2048, job("0.10"), Layout(tp=8, pp=8, vpp=8, dp=16))
    assert "vpp=8" in message and "account-for" in message and "Megatron-Core >= 0.11" in message
    # uneven first/last stages exist from 0.9, with interleaving only from 0.12
    assert not violations(LLAMA_126, C2048, job("0.9"), Layout(tp=8, pp=8, dp=16))
    (old,) = violations(LLAMA_126, C2048, job("0.8"), Layout(tp=8, pp=8, dp=16))
    assert "pp=8" in old and "Megatron-Core >= 0.9" in old
    uneven_vpp = Layout(tp=8, pp=4, vpp=3, dp=32)  # 126 = 42 x 3: first/last stages, v = 3
    assert not violations(LLAMA_126, C2048, job("0.12"), uneven_vpp)
    assert "Megatron-Core >= 0.12" in violations(LLAMA_126, C2048, job("0.11"), uneven_vpp)[0]


def test_an_moe_layout_before_core_0_6_says_the_dispatcher_has_no_off() -> None:
    from planner.performance.step_time import default_profile
    from planner.search.evaluate import evaluate_layouts

    cluster = ClusterSpec(name="c", gpu=H100, num_gpus=16, gpus_per_node=8)
    layout = Layout(tp=1, pp=2, ep=8, dp=8)
    old = TrainingJob(seq_length=4096, global_batch_size=256, megatron_core_version="0.5")
    (result,) = evaluate_layouts(MIXTRAL_8X7B, cluster, old, [layout], default_profile(H100))
    assert not result["valid"]
    (why,) = result["violations"]
    assert "moe_dispatcher=alltoall needs Megatron-Core >= 0.6" in why
    assert "turn it off" not in why and "allgather dispatcher" in why
