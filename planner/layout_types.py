"""Value types of the memory-setting fields of :class:`planner.specs.Layout` (issue 13)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GradReduceDtype = Literal["fp32", "bf16"]
OptimizerStateDtype = Literal["fp32", "bf16"]
CudaGraphs = Literal["none", "partial", "full_iteration"]
RecomputeModule = Literal[
    "core_attn", "mlp", "moe_act", "layernorm", "mla_up_proj", "moe", "shared_experts"
]
OffloadModule = Literal[
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"
]
GRAD_REDUCE_DTYPE_CHOICES: tuple[GradReduceDtype, ...] = ("fp32", "bf16")
OPTIMIZER_STATE_DTYPE_CHOICES: tuple[OptimizerStateDtype, ...] = ("fp32", "bf16")
CUDA_GRAPHS_CHOICES: tuple[CudaGraphs, ...] = ("none", "partial", "full_iteration")
RECOMPUTE_MODULE_CHOICES: tuple[RecomputeModule, ...] = (
    "core_attn", "mlp", "moe_act", "layernorm", "mla_up_proj", "moe", "shared_experts"
)  # fmt: skip
"""``--recompute-modules`` values the planner prices (megatron-facts §1.6, mechanisms-facts §6.4);
the order is the bit order of :class:`planner.layout_settings.SettingsColumns`."""
OFFLOAD_MODULE_CHOICES: tuple[OffloadModule, ...] = (
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"
)  # fmt: skip
"""``--offload-modules`` values the planner prices (megatron-facts §1.7, mechanisms-facts §6.5;
``fused_group_mlp`` needs the TE op fuser and ``gdp_qkv`` gated delta nets, neither modelled)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemorySettings:
    """The memory settings of a layout (mechanisms-facts §6): the base of
    :class:`planner.specs.Layout`, which validates them (planner.layout_checks)."""

    grad_reduce_dtype: GradReduceDtype = "fp32"
    """Gradient buffer and data-parallel reduction dtype: 'fp32' (Megatron's bf16 default,
    4 bytes per parameter) or 'bf16' (``--grad-reduce-in-bf16``: 2 bytes, half the DP traffic;
    changes numerics)."""
    optimizer_state_dtype: OptimizerStateDtype = "fp32"
    """Adam moments: 'fp32' (12 bytes per parameter with the fp32 master weight) or 'bf16'
    (``--use-precision-aware-optimizer`` with bf16 moments and the master weight kept as a 16-bit
    remainder: 6 bytes; mechanisms-facts §6.6; changes numerics)."""
    fp8_param_gather: bool | None = None
    """``--fp8-param-gather``: fp8 weights only (no bf16 copy), gathered in fp8. None means on
    for fp8 jobs with the distributed optimizer or FSDP (NVIDIA's recipes), else off."""
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    """``--recompute-modules`` with recompute='selective'; None means Megatron's default
    ('core_attn',), which is also how that set is stored. Each module frees what
    mechanisms-facts §6.4 says and replays its forward."""
    recompute_num_layers: int | None = None
    """With recompute='full': the first N decoder layers of every model chunk are recomputed
    (``--recompute-method block``); None recomputes every layer (uniform, 1)."""
    cuda_graphs: CudaGraphs = "none"
    """'partial': per-layer TE graphs (attention, and the router/preprocess of MoE layers);
    'full_iteration': one graph per forward-backward. Priced here by their static buffers."""
    activation_offload_layers: int = 0
    """``--cpu-offloading-num-layers N``: the activations of the first N decoder layers go to
    host memory over the host link (pp=1, no recompute: megatron-facts rule 50)."""
    optimizer_offload_fraction: float = 0.0
    """``--optimizer-cpu-offload --optimizer-offload-fraction f``: share of the optimizer state
    (and its Adam step) held and run on the host (mechanisms-facts §6.6)."""
    pipeline_layout: str | None = None
    """``--pipeline-model-parallel-layout``: E embedding, t decoder layer, m MTP layer, L loss,
    '|' between virtual stages, 't*3' / '(tt|)*30' repetitions (planner.model.pipeline_layout).
    The number of stages must be pp x vpp."""
    activation_offload_modules: tuple[OffloadModule, ...] | None = None
    """``--fine-grained-activation-offloading --offload-modules ...`` (core >= 0.16): the
    inputs these modules save go to the host on a D2H stream and come back before their
    backward (planner.memory.offload); None is off."""
