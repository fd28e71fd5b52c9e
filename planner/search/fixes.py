"""A plain-words fix for each rejection rule of the search's histogram.

Most rejected layouts are the search pruning its own candidates (it tries every tp and keeps
those that divide the heads), so each fix says what a user can change *when that rule is what
stands between them and a plan*: a value they fixed, a setting they asked for, or the job.
"""

from __future__ import annotations

from planner.space.rules import RULES

__all__ = ["fix_for"]

_FIXES = {
    "sizes_positive": "Give every parallel size and the micro-batch size as 1 or more.",
    "world_size": "Fixed TP, PP and CP sizes must multiply to a divisor of the GPU count; "
    "leave them blank to let the search pick.",
    "fp8_needs_gpu_support": "Choose bf16, or a GPU with FP8 tensor cores (Hopper or newer).",
    "heads_divisible_by_tp": "Fix TP to a divisor of the model's attention heads, or leave it "
    "blank.",
    "query_groups_vs_tp": "Fix TP to a divisor or a multiple of the model's query groups, or "
    "leave it blank.",
    "ffn_divisible_by_tp": "Fix TP to a divisor of the FFN hidden size, or leave it blank.",
    "shared_expert_ffn_divisible_by_tp": "Fix TP to a divisor of the shared-expert FFN size.",
    "ep_needs_experts": "Leave EP blank (or 1): a dense model has no experts to spread.",
    "experts_divisible_by_ep": "Fix EP to a divisor of the number of experts.",
    "expert_ffn_divisible_by_etp": "Fix expert TP to a divisor of the expert FFN size.",
    "expert_grid_divisible": "Pick EP x expert TP dividing TP x CP x DP (more GPUs or a smaller "
    "EP).",
    "moe_bias_needs_etp1": "Set expert TP to 1: this MoE model has linear biases.",
    "layers_split_by_pp": "Fix PP to a value that splits the model's layers into stages.",
    "vpp_needs_pp": "Use virtual pipeline stages only with PP of 2 or more.",
    "layers_split_by_pp_vpp": "Fix VPP so each pipeline stage's layers split evenly.",
    "global_batch_divisible": "Use a global batch size that is a multiple of micro-batch x DP: "
    "a power of two usually works.",
    "vpp_microbatches": "With VPP, raise the global batch so there are at least PP "
    "micro-batches, a multiple of PP.",
    "seq_divisible_by_2cp": "Use a sequence length divisible by 2 x CP (a power of two works).",
    "sp_needs_tp": "Sequence parallelism needs TP of 2 or more; let the search choose it.",
    "sp_seq_divisible_by_tp": "Use a sequence length divisible by CP x TP.",
    "moe_tp_needs_sp": "Keep sequence parallelism on for a MoE model with TP > 1.",
    "fsdp_no_pp": "Full sharding (FSDP) needs PP = 1: leave PP blank or drop full sharding.",
    "fsdp_no_ep": "Full sharding (FSDP) needs EP = 1: drop full sharding for this MoE model.",
    "fsdp_needs_untied_embeddings": "Drop full sharding: this model ties its embeddings.",
    "seq_within_learned_positions": "Shorten the sequence to the model's learned positions.",
    "moe_a2a_overlap_allowed": "Set MoE all-to-all overlap to auto.",
    "moe_flex_dispatcher_supported": "Set the MoE dispatcher to auto or alltoall.",
    "bf16_needs_gpu_support": "Choose fp16, or a GPU with bf16 tensor cores (Ampere or newer).",
    "pipeline_layout_valid": "Give a pipeline layout with PP x VPP stages, E first and L last.",
    "recompute_modules_apply": "Pick recompute modules the model has.",
    "fp8_param_gather_needs_sharding": "Use FP8 parameter gather only with FP8 and the "
    "distributed optimizer or FSDP.",
    "activation_offload_allowed": "Offload activations only with PP = 1 and no recompute.",
    "offload_needs_host_spec": "Describe the cluster's host link and host memory, or turn "
    "offload off.",
    "optimizer_offload_needs_sharding": "Offload the optimizer only with optimizer sharding on.",
    "cuda_graphs_compatible": "Turn per-layer CUDA graphs off, or recompute selectively.",
    "cp_a2a_heads_divisible": "Leave the CP communication type to the planner (or p2p), or fix "
    "CP to a divisor of the heads per TP rank.",
    "cp_a2a_p2p_hierarchical": "Leave the CP communication type to the planner (or p2p, a2a).",
    "cp_window_needs_all_gather": "Leave the CP communication type to the planner (or "
    "all_gather), or use CP = 1: this model has sliding-window attention.",
    "fine_offload_not_with_legacy": "Set activation_offload_layers to 0 when offloading modules.",
    "fine_offload_moe_modules": "Offload expert_fc1/moe_act only for a MoE model, without "
    "'moe' among the recompute modules.",
    "moe_grouped_gemm_kernel_supported": "Set the MoE expert GEMM kernel to multi_stream (or "
    "leave it to the planner), train in bf16, or name a TE >= 2.8 (Hopper) / 2.13.",
    "fp8_recipe_supported_on_gpu": "Use fp8_recipe='mxfp8' only on Blackwell and 'blockwise' "
    "only on Hopper, or leave fp8_recipe unset for the planner's choice.",
    "stack_version_has_setting": "Turn off the setting the message names, or set "
    "megatron_core_version / te_version to a release that has it.",
}
_BY_SUMMARY = {rule.summary: rule.id for rule in RULES}
MEMORY_FIX = (
    "Use more GPUs, full recompute, full sharding (FSDP), optimizer offload or a shorter "
    "sequence: each lowers the memory per GPU."
)


def fix_for(reason: str, memory_reason: str) -> str:
    """The fix of one histogram reason (a rule's summary, or ``memory_reason``)."""
    if reason == memory_reason:
        return MEMORY_FIX
    rule = _BY_SUMMARY.get(reason)
    if rule is None:
        return "Loosen the setting this rule names."
    return _FIXES.get(rule, "Loosen the setting this rule names.")
