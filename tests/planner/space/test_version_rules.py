"""Layouts against the job's Megatron-Core / TE release (planner.space.version_rules) and the
up-front refusal of a request that fixes a setting its release lacks (version_check)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models_db.catalog import load_gpu
from planner.megatron.flags import launch_spec
from planner.performance.step_time import default_profile
from planner.search.evaluate import evaluate_layouts
from planner.space.rules import violations
from planner.space.version_check import check_settings
from planner.specs import ClusterSpec, Layout, SpecError, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

JOB = TrainingJob(seq_length=4096, global_batch_size=256)
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64, gpus_per_node=8)
MI300X = ClusterSpec(name="m", gpu=load_gpu("mi300x-192gb"), num_gpus=64, gpus_per_node=8)


def on(core: str | None = None, te: str | None = None, **kw: object) -> TrainingJob:
    return replace(JOB, megatron_core_version=core, te_version=te, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "layout", "job", "words"),
    [(LLAMA_8B, Layout(tp=4, cp=2, dp=8, cp_comm_type="a2a"), on(te="1.10"),
      "cp_comm_type=a2a needs Transformer Engine >= 1.11"),
     (LLAMA_8B, Layout(tp=1, dp=64, cuda_graphs="full_iteration"), on("0.13"),
      "cuda_graphs=full_iteration needs Megatron-Core >= 0.14"),
     (MIXTRAL_8X7B, Layout(tp=1, ep=8, dp=64, cuda_graphs="partial"), on("0.15"),
      "cuda_graphs=partial (an MoE model's router scopes) needs Megatron-Core >= 0.16"),
     (MIXTRAL_8X7B, Layout(tp=1, ep=8, dp=64, moe_dispatcher="flex"), on("0.11"),
      "moe_dispatcher=flex needs Megatron-Core >= 0.12"),
     (LLAMA_8B, Layout(tp=1, dp=64, activation_offload_modules=("core_attn",)), on("0.15"),
      "activation_offload_modules=on needs Megatron-Core >= 0.16")],
)  # fmt: skip
def test_a_layout_using_what_its_release_lacks_breaks_the_version_rule(
    model: object, layout: Layout, job: TrainingJob, words: str
) -> None:
    found = violations(model, CLUSTER, job, layout)  # type: ignore[arg-type]
    assert any(words in v for v in found), found
    assert not any("needs Megatron-Core" in v for v in violations(model, CLUSTER, JOB, layout))  # type: ignore[arg-type]


def test_what_the_planner_turns_on_by_itself_stays_off_on_an_older_core() -> None:
    layout = Layout(tp=1, ep=8, dp=64)  # a2a overlap and dispatcher left to the planner
    old, new = on("0.11"), JOB
    profile = default_profile(H100)
    small_nodes = replace(CLUSTER, gpus_per_node=4)  # ep 8 spans nodes: flex where it exists
    (r_old,) = evaluate_layouts(MIXTRAL_8X7B, small_nodes, old, [layout], profile)
    (r_new,) = evaluate_layouts(MIXTRAL_8X7B, small_nodes, new, [layout], profile)
    assert r_old["valid"] and r_new["valid"]
    assert (r_old["layout"]["moe_a2a_overlap"], r_old["layout"]["moe_dispatcher"]) == (
        False,
        "alltoall",
    )
    assert (r_new["layout"]["moe_a2a_overlap"], r_new["layout"]["moe_dispatcher"]) == (True, "flex")
    args = launch_spec(MIXTRAL_8X7B, CLUSTER, old, layout).args
    assert "--overlap-moe-expert-parallel-comm" not in args


def test_the_grouped_kernel_is_refused_on_amd_and_under_delayed_fp8() -> None:
    moe = Layout(tp=1, ep=8, dp=64)
    grouped = on(moe_grouped_gemm_kernel="grouped")
    assert any("amd GPU" in v for v in violations(MIXTRAL_8X7B, MI300X, grouped, moe))
    with pytest.raises(SpecError, match="ROCm's TE is not in the facts") as err:
        check_settings(MIXTRAL_8X7B, MI300X, grouped, {})
    assert err.value.field == "moe_grouped_gemm_kernel"
    fp8 = on(moe_grouped_gemm_kernel="grouped", precision="fp8", fp8_recipe="delayed")
    with pytest.raises(SpecError, match="--fp8-recipe delayed") as err:
        check_settings(MIXTRAL_8X7B, CLUSTER, fp8, {})
    assert err.value.field == "moe_grouped_gemm_kernel"
    check_settings(LLAMA_8B, MI300X, grouped, {})  # a dense model has no expert GEMMs
    # never an NVTE switch off NVIDIA, whatever the job says
    assert not any(
        k.startswith("NVTE_") for k in launch_spec(MIXTRAL_8X7B, MI300X, grouped, moe).env
    )


@pytest.mark.parametrize(
    ("settings", "job", "field", "words"),
    [({"cp_comm_type": "a2a+p2p"}, on("0.10", "1.11"), "cp_comm_type",
      "Transformer Engine >= 1.12"),
     ({"cuda_graphs": "partial"}, on("0.15"), "cuda_graphs", "Megatron-Core >= 0.16"),
     ({"moe_a2a_overlap": True}, on("0.13"), "moe_a2a_overlap", "Megatron-Core >= 0.14"),
     ({"optimizer_state_dtype": ("bf16",)}, on("0.12"), "optimizer_state_dtype", ">= 0.13"),
     ({"recompute_modules": ("shared_experts",)}, on("0.13"), "recompute_modules", ">= 0.14")],
)  # fmt: skip
def test_a_fixed_setting_the_release_lacks_is_refused_naming_the_field(
    settings: dict[str, object], job: TrainingJob, field: str, words: str
) -> None:
    with pytest.raises(SpecError, match=words) as err:
        check_settings(MIXTRAL_8X7B, CLUSTER, job, settings)
    assert err.value.field == field


def test_a_search_list_is_refused_only_when_the_release_has_none_of_it() -> None:
    check_settings(MIXTRAL_8X7B, CLUSTER, on("0.12"), {"optimizer_state_dtype": ("fp32", "bf16")})
    check_settings(MIXTRAL_8X7B, CLUSTER, on("0.12"), {"cuda_graphs": None, "cp_comm_type": None})
