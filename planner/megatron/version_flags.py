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
  ``NVTE_USE_CUTLASS_GROUPED_GEMM=1`` on Hopper with bf16/fp16 from TE 2.8;
* the attention backend: ``--attention-backend`` from core 0.11, Transformer Engine's
  ``NVTE_FLASH_ATTN`` / ``NVTE_FUSED_ATTN`` environment before (:func:`attention_args`).

Which settings a release has at all is checked before (``planner.space.version_rules``); these
functions only spell what passed.
"""

from __future__ import annotations

from planner.model.pipeline import split_layers
from planner.space.version_rules import split_lacking
from planner.specs import GPUSpec, Layout, ModelSpec, TrainingJob
from planner.stack_versions import Version, core_version, te_version

__all__ = [
    "ATTENTION_ENV",
    "attention_args",
    "attention_env",
    "dispatcher_args",
    "fp8_recipe_args",
    "graph_args",
    "grouped_kernel_env",
    "vpp_args",
]

# the MoE dropless recipe graphs attention, router and preprocess; experts stay eager (§3.4)
MOE_GRAPH_MODULES = ("attn", "moe_router", "moe_preprocess")
GRAPH_MODULES_FLAG: Version = (0, 18)  # --cuda-graph-modules, renamed from --cuda-graph-scope
GRAPH_IMPL_FLAG: Version = (0, 15)  # --cuda-graph-impl
FULL_ITERATION_IMPL: Version = (0, 18)
FLEX_BACKEND_FLAG: Version = (0, 16)  # --moe-flex-dispatcher-backend (--moe-enable-deepep before)
FP8_RECIPE_FLAG: Version = (0, 12)
VIRTUAL_STAGES_FLAG: Version = (0, 12)  # megatron-log-format §2: printed since 0.12
CUBLASLT_GROUPED_TE: Version = (2, 13)
ATTENTION_BACKEND_FLAG: Version = (0, 11)
"""First core with ``--attention-backend``. The facts sheets give no release for it
(megatron-facts §1.10 reads main only; mechanisms-facts §8 has no row): megatron-core 0.11.0 on
PyPI is the first whose ``transformer/enums.py`` defines ``AttnBackend`` and whose
``language_module.py`` turns the config's backend into TE's variables; 0.10.0 has neither (both
sdists read for brief loose9; the lead is to add the row to mechanisms-facts §8)."""
ATTENTION_ENV: dict[str, dict[str, str]] = {
    "flash": {"NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "0"},
    "fused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "1"},
    "unfused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "0"},
}
"""Before the flag, TE's own switches select the backend: the flag only sets these variables
(megatron-facts §1.10, ``_set_attention_backend``); with both off TE runs its unfused attention
(core 0.9's retro config asks for exactly that). 'auto' sets none: TE's default, both enabled.
``--use-flash-attn`` is not used: no core code reads it (megatron-facts §1.10, §9 item 10)."""


def attention_args(job: TrainingJob) -> list[str]:
    """``--attention-backend`` where the job's core has it (0.11), else nothing: the backend is
    then chosen by :func:`attention_env`."""
    if core_version(job) < ATTENTION_BACKEND_FLAG:
        return []
    # --use-flash-attn is inert; the backend flag is what selects kernels (§1.10, §9 item 10)
    return ["--attention-backend", job.attention_backend]


def attention_env(job: TrainingJob) -> dict[str, str]:
    """TE's attention variables for a core before ``--attention-backend`` (none from 0.11: the
    flag sets them, and asserts if they were set to something else, megatron-facts §1.10)."""
    if core_version(job) >= ATTENTION_BACKEND_FLAG:
        return {}
    return dict(ATTENTION_ENV.get(job.attention_backend, {}))


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
