"""The search chooses the MoE expert-GEMM kernel where the job leaves it open, and only where a
grouped kernel exists for the GPU, the precision and the TE release (search.kernel_choice)."""

from __future__ import annotations

from functools import cache

import pytest

from models_db.catalog import load_gpu, load_model
from planner.megatron.flags import launch_spec
from planner.performance.step_time import default_profile
from planner.search.planning import PlanResult, plan
from planner.space.enumeration import SearchConstraints
from planner.specs import ClusterSpec, GPUSpec, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B

MI300X = load_gpu("mi300x-192gb")


@cache
def _plan(gpu: GPUSpec, ep: int | None = None, **job: object) -> PlanResult:
    model = load_model("qwen3-30b-a3b")  # 128 small experts: many GEMMs per rank
    cluster = ClusterSpec(name="c", gpu=gpu, num_gpus=16, gpus_per_node=8)
    j = TrainingJob(seq_length=4096, global_batch_size=256, **job)  # type: ignore[arg-type]
    constraints = None if ep is None else SearchConstraints(ep=(ep,))
    return plan(model, cluster, j, constraints=constraints, profile=default_profile(gpu), top_k=3)


def test_grouped_is_chosen_where_it_exists_and_is_faster() -> None:
    # EP 2: 64 experts per GPU, where one grouped kernel gains most (mechanisms-facts §4.2
    # reading): ~15 % on the best layout, far from MIN_KERNEL_GAIN (1 %); the searched EP's
    # best layouts sit within a few tenths of a percent of that threshold
    result = _plan(H100, ep=2)
    assert result.plans[0].job.moe_grouped_gemm_kernel == "grouped"
    assert result.pool is not None and set(result.pool.choices["moe_grouped_gemm_kernel"]) == {
        "grouped"
    }
    fixed = _plan(H100, ep=2, moe_grouped_gemm_kernel="multi_stream")
    assert fixed.plans[0].job.moe_grouped_gemm_kernel == "multi_stream"
    # the chosen kernel is what the plan is priced with: faster than TE's default here
    assert result.plans[0].objective_value > fixed.plans[0].objective_value


@pytest.mark.parametrize(
    ("gpu", "job", "why"),
    [(H100, {"te_version": "2.5"}, "no grouped kernel before TE 2.8"),
     (H100, {"precision": "fp8", "fp8_recipe": "delayed"}, "no grouped kernel for delayed fp8"),
     (H100, {"precision": "fp8", "megatron_core_version": "0.11"}, "delayed: core 0.11 default"),
     (MI300X, {}, "TE's grouped kernels are NVIDIA's")],
)  # fmt: skip
def test_multi_stream_where_no_grouped_kernel_exists(
    gpu: GPUSpec, job: dict[str, object], why: str
) -> None:
    result = _plan(gpu, **job)
    assert result.plans, why
    assert all(p.job.moe_grouped_gemm_kernel == "multi_stream" for p in result.plans), why
    for p in result.plans:
        env = launch_spec(p.model, p.cluster, p.job, p.layout).env
        assert not any(k.startswith("NVTE_") for k in env), why


def test_a_dense_model_leaves_the_kernel_unset() -> None:
    cluster = ClusterSpec(name="c", gpu=H100, num_gpus=8, gpus_per_node=8)
    job = TrainingJob(seq_length=4096, global_batch_size=64)
    result = plan(LLAMA_8B, cluster, job, profile=default_profile(H100), top_k=1)
    assert result.plans[0].job.moe_grouped_gemm_kernel is None
    assert "moe_grouped_gemm_kernel" not in (result.pool.choices if result.pool else {})


def test_an_old_release_plans_without_what_it_lacks() -> None:
    """core 0.11: no DeepEP, no A2A overlap, no a2a CP types; the search still finds plans."""
    model = load_model("qwen3-30b-a3b")
    cluster = ClusterSpec(name="c", gpu=H100, num_gpus=32, gpus_per_node=4)
    job = TrainingJob(seq_length=8192, global_batch_size=64, megatron_core_version="0.11",
                      te_version="1.13")  # fmt: skip
    result = plan(model, cluster, job, profile=default_profile(H100), top_k=5,
                  constraints=SearchConstraints(cp=(1, 2)))  # fmt: skip
    assert result.plans
    for p in result.plans:
        assert p.layout.moe_dispatcher == "alltoall" and not p.layout.moe_a2a_overlap
        assert p.layout.cp_comm_type in (None, "p2p")
        assert p.layout.cuda_graphs != "full_iteration"
