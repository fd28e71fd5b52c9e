"""What to write instead of a Megatron-LM argument name in a request (brief evaljudge8 2a).

People who know a run from its launch script write Megatron's names (``tensor_model_parallel_size``,
``use_distributed_optimizer``, ``fp4_recipe``). Model fields already follow Megatron's names; the
layout and the stack have shorter ones. An unknown field that is a Megatron argument gets a 422
saying which field expresses it, or, where the planner has no such setting, that it has none and
what it launches and prices instead, so that nothing a source states is silently lost.
"""

from __future__ import annotations

RENAMED: dict[str, str] = {
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "num_virtual_stages_per_pipeline_rank": "vpp",
    "virtual_pipeline_model_parallel_size": "vpp",
    "num_layers_per_virtual_pipeline_stage": "vpp (virtual stages per pipeline rank: L / (pp x N))",
    "context_parallel_size": "cp",
    "expert_model_parallel_size": "ep",
    "expert_tensor_parallel_size": "etp",
    "data_parallel_size": "num_gpus (dp = num_gpus / (tp x pp x cp))",
    "recompute_granularity": "recompute ('none', 'selective' or 'full')",
    "recompute_activations": "recompute='selective'",
    "recompute_method": "recompute='full' with recompute_num_layers",
    "use_distributed_optimizer": "optimizer_sharding='optimizer' (the default)",
    "use_torch_fsdp2": "optimizer_sharding='full'",
    "use_megatron_fsdp": "optimizer_sharding='full'",
    "moe_token_dispatcher_type": "moe_dispatcher ('alltoall' or 'flex')",
    "moe_enable_deepep": "moe_dispatcher='flex'",
    "moe_flex_dispatcher_backend": "moe_dispatcher='flex'",
    "overlap_moe_expert_parallel_comm": "moe_a2a_overlap",
    "moe_router_force_load_balancing": "moe_imbalance=1.0",
    "cross_entropy_loss_fusion": "cross_entropy_fusion ('native', 'te', 'te_fp32_grad', 'unfused')",
    "cross_entropy_fusion_impl": "cross_entropy_fusion ('native', 'te', 'te_fp32_grad', 'unfused')",
    "fp8_format": "precision='fp8'",
    "fp8": "precision='fp8'",
    "bf16": "precision='bf16'",
    "fp16": "precision='fp16'",
    "grad_reduce_in_bf16": "grad_reduce_dtype='bf16'",
    "use_precision_aware_optimizer": "grad_reduce_dtype / optimizer_state_dtype ('bf16')",
    "exp_avg_dtype": "optimizer_state_dtype",
    "exp_avg_sq_dtype": "optimizer_state_dtype",
    "main_grads_dtype": "grad_reduce_dtype",
    "pipeline_model_parallel_layout": "pipeline_layout",
    "cuda_graph_impl": "cuda_graphs ('none', 'partial' or 'full_iteration')",
    "cuda_graph_scope": "cuda_graphs ('none', 'partial' or 'full_iteration')",
    "cuda_graph_modules": "cuda_graphs ('none', 'partial' or 'full_iteration')",
    "enable_cuda_graph": "cuda_graphs ('none', 'partial' or 'full_iteration')",
    "external_cuda_graph": "cuda_graphs='partial'",
    "cpu_offloading_num_layers": "activation_offload_layers",
    "optimizer_cpu_offload": "optimizer_offload_fraction (> 0)",
    "hierarchical_context_parallel_sizes": "cp_comm_type='a2a+p2p' (the planner sets the sizes)",
}
"""Megatron argument -> the request field (or value) that says the same."""

UNMODELLED: dict[str, str] = {
    "fp4_recipe": (
        "the planner has no fp4 setting: NVFP4 (--fp4-format, --fp4-recipe nvfp4, TE >= 2.8) is "
        "not priced; use precision='fp8' with fp8_recipe, or remove the field"
    ),
    "moe_router_fusion": (
        "the planner has no router-fusion setting: it prices the unfused router, Megatron's "
        "default (mechanisms-facts §3.3, §8); remove the field"
    ),
    "moe_permute_fusion": (
        "not a setting here: MoE launches always pass --moe-permute-fusion where the release "
        "has it (core 0.11, TE 1.11) and the step time prices it; remove the field"
    ),
    "moe_shared_expert_overlap": (
        "the planner has no shared-expert-overlap setting: it prices the shared expert without "
        "that overlap (Megatron's default); remove the field"
    ),
    "tp_comm_overlap_cfg": (
        "the planner has no userbuffers configuration: tp_comm_overlap turns TE's overlap on or "
        "off with its default configuration"
    ),
}
"""Megatron settings the request has no field for: what the planner does instead."""


def unknown_field_hint(field: str) -> str | None:
    """The message for an unknown request field that a Megatron user would write, or None."""
    name = field.rsplit(".", 1)[-1].removeprefix("--").replace("-", "_")
    if name in RENAMED:
        return f"unknown field {field!r}: Megatron's {name} is {RENAMED[name]} here"
    if name in UNMODELLED:
        return f"unknown field {field!r}: {UNMODELLED[name]}"
    return None
