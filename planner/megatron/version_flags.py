"""Launch flags whose spelling depends on the job's Megatron-Core / Transformer Engine release
(issue 12 item 1: "the stack a run used is an input"; mechanisms-facts §8 "stack generations").

* partial CUDA graphs: ``--cuda-graph-impl transformer_engine`` from core 0.15, with the MoE
  modules in ``--cuda-graph-modules`` from 0.18 (``--cuda-graph-scope`` in 0.16-0.17);
  ``--external-cuda-graph`` in 0.12-0.14;
* full-iteration graphs: ``--cuda-graph-impl full_iteration`` from 0.18;
  ``--cuda-graph-impl local --cuda-graph-scope full_iteration`` in 0.15-0.17;
  ``--enable-cuda-graph --cuda-graph-scope full_iteration`` in 0.14;
* DeepEP: ``--moe-flex-dispatcher-backend deepep`` from 0.16, ``--moe-enable-deepep`` in
  0.12-0.15;
* ``--fp8-recipe`` from 0.12 (delayed scaling only, and no flag, before);
* ``--num-virtual-stages-per-pipeline-rank`` from 0.12, ``--num-layers-per-virtual-pipeline-stage``
  before;
* the grouped expert GEMM: ``NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM=1`` from TE 2.13, and
  ``NVTE_USE_CUTLASS_GROUPED_GEMM=1`` on Hopper with bf16/fp16 from TE 2.8.

Which settings a release has at all is checked before (``planner.space.version_rules``); these
functions only spell what passed.
"""

from __future__ import annotations

from planner.model.pipeline import split_layers
from planner.space.version_rules import split_lacking
from planner.specs import GPUSpec, Layout, ModelSpec, TrainingJob
from planner.stack_versions import Version, core_version, te_version

__all__ = ["dispatcher_args", "fp8_recipe_args", "graph_args", "grouped_kernel_env", "vpp_args"]

# the MoE dropless recipe graphs attention, router and preprocess; experts stay eager (§3.4)
MOE_GRAPH_MODULES = ("attn", "moe_router", "moe_preprocess")
GRAPH_MODULES_FLAG: Version = (0, 18)  # --cuda-graph-modules, renamed from --cuda-graph-scope
GRAPH_IMPL_FLAG: Version = (0, 15)  # --cuda-graph-impl
FULL_ITERATION_IMPL: Version = (0, 18)
FLEX_BACKEND_FLAG: Version = (0, 16)  # --moe-flex-dispatcher-backend (--moe-enable-deepep before)
FP8_RECIPE_FLAG: Version = (0, 12)
VIRTUAL_STAGES_FLAG: Version = (0, 12)  # megatron-log-format §2: printed since 0.12
CUBLASLT_GROUPED_TE: Version = (2, 13)


def graph_args(model: ModelSpec, job: TrainingJob, lay: Layout) -> list[str]:
    """The CUDA-graph flags of a layout for the job's core (mechanisms-facts §3.4, §8)."""
    core = core_version(job)
    if lay.cuda_graphs == "partial":
        if core < GRAPH_IMPL_FLAG:
            return ["--external-cuda-graph"]  # TE per-layer graphs, core 0.12-0.14
        args = ["--cuda-graph-impl", "transformer_engine"]
        if model.is_moe:  # MoE scopes exist from 0.16 (the rule refuses older cores)
            flag = "--cuda-graph-modules" if core >= GRAPH_MODULES_FLAG else "--cuda-graph-scope"
            args += [flag, *MOE_GRAPH_MODULES]
        return args
    if lay.cuda_graphs == "full_iteration":
        nan_check = ["--no-check-for-nan-in-loss-and-grad"]  # a graph cannot check (§3.4)
        if core >= FULL_ITERATION_IMPL:
            return ["--cuda-graph-impl", "full_iteration", *nan_check]
        if core >= GRAPH_IMPL_FLAG:
            return [
                "--cuda-graph-impl",
                "local",
                "--cuda-graph-scope",
                "full_iteration",
                *nan_check,
            ]
        return ["--enable-cuda-graph", "--cuda-graph-scope", "full_iteration", *nan_check]
    return []


def dispatcher_args(job: TrainingJob, flex: bool) -> list[str]:
    """``--moe-token-dispatcher-type`` and, for DeepEP, the backend flag of the job's core."""
    if not flex:
        return ["--moe-token-dispatcher-type", "alltoall"]
    if core_version(job) >= FLEX_BACKEND_FLAG:
        return ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "deepep"]
    return ["--moe-token-dispatcher-type", "flex", "--moe-enable-deepep"]


def fp8_recipe_args(job: TrainingJob, recipe: str) -> list[str]:
    """``--fp8-format hybrid`` and the recipe flag where the core has it (delayed before)."""
    if core_version(job) < FP8_RECIPE_FLAG:
        return ["--fp8-format", "hybrid"]
    return ["--fp8-format", "hybrid", "--fp8-recipe", recipe]


def vpp_args(job: TrainingJob, num_layers: int, lay: Layout) -> list[str]:
    """The interleaved-schedule flag: v stages per rank (core >= 0.12), else the layers per
    virtual stage N (megatron-facts rule 9): L / (p v), or (L + 2) / (p v) with the embedding
    and the loss counted as layers (the only splits such a release can interleave:
    planner.space.version_rules.split_lacking)."""
    stages = lay.pp * lay.vpp
    if core_version(job) < VIRTUAL_STAGES_FLAG:
        split = split_layers(num_layers, lay.pp, lay.vpp, split_lacking(job))
        counted = num_layers + (2 if split is not None and split.method == "account" else 0)
        if split is not None and split.method != "uneven" and counted % stages == 0:
            return ["--num-layers-per-virtual-pipeline-stage", str(counted // stages)]
    return ["--num-virtual-stages-per-pipeline-rank", str(lay.vpp)]


def grouped_kernel_env(gpu: GPUSpec, job: TrainingJob) -> dict[str, str]:
    """TE's switches for one grouped expert-GEMM kernel (mechanisms-facts §4.1), NVIDIA only:
    the cuBLASLt grouped GEMM from TE 2.13, and on Hopper with bf16/fp16 CUTLASS from TE 2.8."""
    if gpu.vendor != "nvidia":
        return {}
    env: dict[str, str] = {}
    if te_version(job) >= CUBLASLT_GROUPED_TE:
        env["NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM"] = "1"
    if gpu.architecture == "hopper" and job.precision in ("bf16", "fp16"):
        env["NVTE_USE_CUTLASS_GROUPED_GEMM"] = "1"
    return env
