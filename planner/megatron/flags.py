"""Megatron-LM launch flags for a layout.

:func:`megatron_args` turns a model, a cluster, a job and a layout into the argv of Megatron-LM's
``pretrain_gpt.py`` (flag names from megatron-facts §1, the pitfalls of §9 handled);
:func:`launch_spec` adds the environment and a ``torchrun`` command line;
:func:`planner.megatron.args.parse_megatron_args` reads the flags back.

What is left to the user: data, tokenizer, optimizer hyper-parameters, checkpointing and logging
flags (``LaunchSpec.notes`` says so). Rotary settings (base, partial rotation, Llama-3 scaling,
YaRN) are emitted from the ModelSpec's rotary fields.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from planner.fp8_recipes import effective_recipe, unset_recipe_note
from planner.megatron.memory_flags import fp8_param_gather_on, memory_args, recompute_args
from planner.megatron.stack_flags import stack_args, stack_env
from planner.megatron.variant_flags import variant_args
from planner.megatron.version_flags import dispatcher_args, fp8_recipe_args, graph_args, vpp_args
from planner.model.flops import VOCAB_DIVISIBLE_BY, padded_vocab
from planner.model.pipeline import pipeline_flags
from planner.space import comm_flags
from planner.space.comm_flags import TP_COMM_OVERLAP_ARCHITECTURES as TP_COMM_OVERLAP_ARCHITECTURES
from planner.space.comm_flags import tp_comm_overlap as tp_comm_overlap  # re-exported
from planner.space.cp_comm_rules import hierarchical_sizes
from planner.space.version_rules import pin_layout, split_lacking
from planner.specs import (
    BLACKWELL_OR_NEWER,
    ClusterSpec,
    Layout,
    ModelSpec,
    TrainingJob,
)
from planner.stack_defaults import lowered_notes
from planner.stack_versions import missing, stack_name

__all__ = ["LaunchSpec", "launch_spec", "megatron_args"]

_BLACKWELL_OR_NEWER = BLACKWELL_OR_NEWER


def _moe_layer_freq(model: ModelSpec) -> str:
    """``--moe-layer-freq``: the int form, or the list form for leading dense layers (§1.5)."""
    if model.moe_first_dense_layers == 0:
        return str(model.moe_layer_freq)
    pattern = [int(x) for x in model.moe_layer_pattern()]
    runs: list[str] = []
    start = 0
    for i in range(1, len(pattern) + 1):
        if i == len(pattern) or pattern[i] != pattern[start]:
            runs.append(f"[{pattern[start]}]*{i - start}")
            start = i
    return "(" + "+".join(runs) + ")"


def megatron_args(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout
) -> list[str]:
    """The argv for ``pretrain_gpt.py`` that trains ``model`` with ``layout``."""
    # normalized, the planner's choices explicit (off where the job's release lacks them)
    lay = comm_flags.resolve(
        model, cluster, pin_layout(job, layout), tp_overlap_on=job.tp_comm_overlap
    )
    args = [
        "--tensor-model-parallel-size", str(lay.tp),
        "--pipeline-model-parallel-size", str(lay.pp),
        "--context-parallel-size", str(lay.cp),
    ]  # fmt: skip
    if lay.cp > 1 and lay.cp_comm_type not in (None, "p2p"):
        args += _cp_comm_args(cluster, lay)  # p2p is Megatron's default: no flag (core < 0.10)
    # even, account-for-embedding/loss, or uneven first/last stages (planner.model.pipeline)
    if lay.pipeline_layout:  # the only VPP flag then (rule 7); v = stages / p
        args += ["--pipeline-model-parallel-layout", lay.pipeline_layout]
    else:
        args += pipeline_flags(model.num_layers, lay.pp, lay.vpp, split_lacking(job))
    if lay.vpp > 1 and not lay.pipeline_layout:
        # the v form works with even and uneven stages alike (megatron-facts §1.2, rule 10)
        args += vpp_args(job, model.num_layers, lay)
    if model.is_moe:
        args += ["--expert-model-parallel-size", str(lay.ep)]
        args += ["--expert-tensor-parallel-size", str(lay.expert_tp)]
    if lay.sp:
        args.append("--sequence-parallel")
    if job.tp_comm_overlap and tp_comm_overlap(cluster, lay.tp, lay.sp):
        args.append("--tp-comm-overlap")  # TE userbuffers; needs SP (rule 29)
    if lay.moe_a2a_overlap:
        args += list(comm_flags.A2A_FLAGS)  # 1F1B A2A overlap (rule 40; planner.space.comm_flags)
    if lay.optimizer_sharding == "full":
        args.append("--use-torch-fsdp2")  # rule 58: pp=1, ep=1, untied, no dist-opt
    elif lay.optimizer_sharding == "optimizer":
        # overlap-param-gather needs the distributed optimizer and overlap-grad-reduce (rule 56)
        args += ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    else:
        args.append("--overlap-grad-reduce")
    # always pass B: the default is one microbatch (megatron-facts §9 item 3)
    args += ["--micro-batch-size", str(lay.micro_batch_size)]
    args += ["--global-batch-size", str(job.global_batch_size)]
    args += ["--seq-length", str(job.seq_length)]
    # required even with RoPE and must be >= seq-length (megatron-facts §1.3, rule 23)
    max_pos = max(model.max_position_embeddings or job.seq_length, job.seq_length)
    args += ["--max-position-embeddings", str(max_pos)]
    args += _shape_args(model)
    if model.is_moe:
        args += _moe_args(model)
        args += dispatcher_args(job, lay.moe_dispatcher == "flex")  # DeepEP's flag by release
    if model.multi_latent_attention:
        args += _mla_args(model)
    if model.mtp_num_layers:
        args += ["--mtp-num-layers", str(model.mtp_num_layers)]
    args += recompute_args(lay)
    args += memory_args(model, job.precision, lay)  # precision, optimizer, offload
    args += graph_args(model, job, lay)  # CUDA graphs, spelled for the job's core
    if job.precision == "fp8":
        # the job's recipe, else the planner's (planner.fp8_recipes); Megatron's default is delayed
        args += fp8_recipe_args(job, effective_recipe(job, cluster.gpu) or "delayed")
        if fp8_param_gather_on(job.precision, lay):
            args.append("--fp8-param-gather")  # needs dist-opt or FSDP (rule 53)
    args += stack_args(model, job)  # attention backend, cross-entropy, forced MoE balance
    return args


def _cp_comm_args(cluster: ClusterSpec, lay: Layout) -> list[str]:
    """``--cp-comm-type`` in TE's spelling (passed verbatim to TE, megatron-facts §1), with the
    hierarchical sizes a2a+p2p needs (rule 24: c1 c2 = cp; c1 = the CP ranks on one node)."""
    args = ["--cp-comm-type", str(lay.cp_comm_type)]
    if lay.cp_comm_type == "a2a+p2p":
        c1, c2 = hierarchical_sizes(cluster, lay.tp, lay.cp)
        args += ["--hierarchical-context-parallel-sizes", str(int(c1)), str(int(c2))]
    return args


def _shape_args(model: ModelSpec) -> list[str]:
    args = [
        "--num-layers", str(model.num_layers),
        "--hidden-size", str(model.hidden_size),
        "--ffn-hidden-size", str(model.ffn_hidden_size),
        "--num-attention-heads", str(model.num_attention_heads),
    ]  # fmt: skip
    if model.num_query_groups is not None:
        # without --group-query-attention the group count is ignored (megatron-facts §9 item 6)
        args += ["--group-query-attention", "--num-query-groups", str(model.num_query_groups)]
    if model.kv_channels is not None:
        args += ["--kv-channels", str(model.kv_channels)]
    args += variant_args(model)  # activation, sliding window, softmax type
    args += ["--normalization", model.normalization]
    args += ["--position-embedding-type", model.position_embedding_type]
    args += _rotary_args(model)
    if model.untie_embeddings_and_output_weights:
        args.append("--untie-embeddings-and-output-weights")
    if not model.add_bias_linear:
        args.append("--disable-bias-linear")  # biases are on by default (§1.4)
    if model.add_qkv_bias:
        args.append("--add-qkv-bias")
    if model.qk_layernorm:
        args.append("--qk-layernorm")
    args += ["--hidden-dropout", repr(model.hidden_dropout)]
    args += ["--attention-dropout", repr(model.attention_dropout)]
    args += ["--vocab-size", str(model.vocab_size)]
    args += ["--make-vocab-size-divisible-by", str(VOCAB_DIVISIBLE_BY)]
    return args


def _number(value: float) -> str:
    """A float flag value as a launch script writes it: 500000, 0.5, 1e-06."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _rotary_args(model: ModelSpec) -> list[str]:
    """RoPE base, partial rotation and Llama-3 scaling (megatron-facts §1.4, catalog-facts §1.3).

    Without ``--rotary-base`` Megatron trains with theta 10000, a different model for Llama 3.1
    (500000) or Mixtral (1e6). The YaRN flags of MLA models are in :func:`_mla_args`.
    """
    args: list[str] = []
    if model.rotary_base is not None:
        args += ["--rotary-base", _number(model.rotary_base)]
    if model.rotary_percent != 1.0:
        args += ["--rotary-percent", _number(model.rotary_percent)]
    if model.use_rope_scaling:
        args.append("--use-rope-scaling")
        if model.rope_scaling_factor != 8.0:  # Megatron's default factor is 8.0
            args += ["--rope-scaling-factor", _number(model.rope_scaling_factor)]
    if model.position_embedding_type == "yarn" and not model.multi_latent_attention:
        args += _yarn_args(model)
    return args


def _yarn_args(model: ModelSpec) -> list[str]:
    args: list[str] = []
    if model.rotary_scaling_factor is not None:
        args += ["--rotary-scaling-factor", _number(model.rotary_scaling_factor)]
    if model.mscale is not None:
        args += ["--mscale", _number(model.mscale)]
    if model.mscale_all_dim is not None:
        args += ["--mscale-all-dim", _number(model.mscale_all_dim)]
    return args


def _moe_args(model: ModelSpec) -> list[str]:
    args = [
        "--num-experts",
        str(model.num_experts),
        "--moe-router-topk",
        str(model.moe_router_topk),
    ]
    if model.moe_ffn_hidden_size is not None:
        args += ["--moe-ffn-hidden-size", str(model.moe_ffn_hidden_size)]
    if model.moe_shared_expert_intermediate_size is not None:
        args += [
            "--moe-shared-expert-intermediate-size",
            str(model.moe_shared_expert_intermediate_size),
        ]
    args += ["--moe-layer-freq", _moe_layer_freq(model)]
    args.append("--moe-grouped-gemm")
    if model.moe_router_topk == 1:  # top-1 with the softmax router needs it (rule 35)
        args.append("--moe-router-pre-softmax")
    return args


def _mla_args(model: ModelSpec) -> list[str]:
    # the CLI defaults (kv_lora_rank 32, LayerNorm) override MLA's own: always pass them (§1.11)
    args = ["--multi-latent-attention"]
    if model.q_lora_rank is not None:
        args += ["--q-lora-rank", str(model.q_lora_rank)]
    args += ["--kv-lora-rank", str(model.kv_lora_rank)]
    args += ["--qk-head-dim", str(model.qk_head_dim)]
    args += ["--qk-pos-emb-head-dim", str(model.qk_pos_emb_head_dim)]
    args += ["--v-head-dim", str(model.v_head_dim)]
    # The CLI's --rotary-scaling-factor 1.0 overrides MLA's YaRN factor 40 (§1.11), so the rope
    # type and the YaRN factor are always explicit; --mscale/--mscale-all-dim default to the
    # same values on the CLI and in MLATransformerConfig and are passed when the spec sets them.
    if model.rotary_scaling_factor is None:
        args += ["--rope-type", "rope"]
    else:
        args += ["--rope-type", "yarn", *_yarn_args(model)]
    return args


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSpec:
    """Everything needed to start one node of the run."""

    args: list[str]
    """argv of the training script."""
    env: dict[str, str]
    """Environment variables to export on every node."""
    command: str
    """A shell line: env assignments, ``torchrun`` and the quoted argv."""
    notes: list[str] = field(default_factory=list)
    """What the user still has to add (data, tokenizer, hyper-parameters, model extras)."""


def launch_env(cluster: ClusterSpec, layout: Layout) -> dict[str, str]:
    """Environment variables Megatron needs or benefits from for this layout (pass it through
    :func:`planner.space.comm_flags.resolve` first: an unresolved MoE A2A overlap counts as off)."""
    lay = layout.normalized()
    env: dict[str, str] = {}
    pre_blackwell = cluster.gpu.architecture not in _BLACKWELL_OR_NEWER
    if lay.moe_a2a_overlap:
        # the A2A overlap needs more than one connection; rule 30's assertion is then skipped
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = comm_flags.CONNECTIONS
    # rule 30: asserted for tp > 1 or cp > 1 before Blackwell, except under Torch-FSDP2
    elif pre_blackwell and (lay.tp > 1 or lay.cp > 1) and lay.optimizer_sharding != "full":
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    # stops the caching allocator holding NCCL-stream tensors (memory-estimator-fujii §7)
    env["TORCH_NCCL_AVOID_RECORD_STREAMS"] = "1"
    if lay.activation_offload_modules:
        env["NVTE_CPU_OFFLOAD_V1"] = "1"  # fine-grained offload with TE >= 2.10 (rule 51)
    return env


def launch_spec(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    layout: Layout,
    *,
    script: str = "pretrain_gpt.py",
) -> LaunchSpec:
    """argv, environment and a ``torchrun`` line for every node (``$NODE_RANK`` varies)."""
    resolved = comm_flags.resolve(
        model, cluster, pin_layout(job, layout), tp_overlap_on=job.tp_comm_overlap
    )
    args = megatron_args(model, cluster, job, resolved)
    env = launch_env(cluster, resolved)
    if job.expandable_segments:  # against fragmentation (mechanisms-facts §6.7, MoE README)
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        if resolved.cuda_graphs == "partial":  # TE's graphs need it then (mechanisms-facts §3.4)
            env["NCCL_GRAPH_REGISTER"] = "0"
    env.update(stack_env(model, cluster.gpu, job))  # TE's expert-GEMM kernel (§4.1)
    per_node = min(cluster.gpus_per_node, cluster.num_gpus)
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    torchrun = (
        f"torchrun --nproc-per-node {per_node} --nnodes {cluster.num_nodes} "
        "--node-rank $NODE_RANK --master-addr $MASTER_ADDR --master-port $MASTER_PORT"
    )
    command = f"{prefix} {torchrun} {shlex.quote(script)} {shlex.join(args)}".strip()
    notes = [
        "add data, tokenizer, optimizer, schedule, checkpoint and logging flags "
        "(e.g. --data-path, --tokenizer-type, --lr, --train-iters, --save)",
        f"the plan assumes a tokenizer of {model.vocab_size} entries, padded to "
        f"{padded_vocab(model, layout.tp)}; --vocab-size is only read "
        "by NullTokenizer, which adds one EOD entry",
    ]
    if model.position_embedding_type == "yarn" and not model.multi_latent_attention:
        notes.append(
            "--position-embedding-type yarn: check the YaRN settings in Megatron's config dump "
            "(scaling factor, original context length, beta_fast/beta_slow); the planner passes "
            "--rotary-base and --rotary-scaling-factor/--mscale*, which megatron-facts §1.11 "
            "documents for MLA only"
        )
    if resolved.moe_a2a_overlap:
        notes.append(
            "--overlap-moe-expert-parallel-comm needs PyTorch >= 2.6 (megatron-facts rule 40)"
        )
    if resolved.cp > 1 and resolved.cp_comm_type not in (None, "p2p"):
        te = {"all_gather": "1.10", "a2a": "1.11", "a2a+p2p": "1.12"}[str(resolved.cp_comm_type)]
        notes.append(
            f"--cp-comm-type {resolved.cp_comm_type} needs Megatron core >= 0.10 and Transformer "
            f"Engine >= {te} (mechanisms-facts §1.6)"
        )
    if "NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM" in env:  # moe_grouped_gemm_kernel=grouped
        notes.append(
            "moe_grouped_gemm_kernel=grouped (NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM=1) needs "
            "Transformer Engine >= 2.13 with cuBLASLt >= 13.3 (>= 13.4 on Hopper; mechanisms-facts "
            "§4.1); with an older cuBLASLt pass multi_stream, TE's default"
        )
    elif "NVTE_USE_CUTLASS_GROUPED_GEMM" in env:
        notes.append(
            "moe_grouped_gemm_kernel=grouped runs TE's CUTLASS grouped GEMM "
            "(NVTE_USE_CUTLASS_GROUPED_GEMM=1, Hopper, bf16/fp16, TE >= 2.8; mechanisms-facts §4.1)"
        )
    notes.append(f"flags for {stack_name(job)} (megatron_core_version / te_version)")
    if recipe_note := unset_recipe_note(job, cluster.gpu, flagged="--fp8-recipe" in args):
        notes.append(recipe_note)  # the recipe priced, where the job named none
    notes.extend(lowered_notes(job))  # defaults the job's release lacks, and their fallback
    lacking = missing(job, "moe_permute_fusion", "true") if model.is_moe else None
    if lacking:
        notes.append(
            f"no --moe-permute-fusion: it needs {lacking} (mechanisms-facts §8); the step time "
            "prices the unfused permute's kernel launches"
        )
    if resolved.moe_dispatcher == "flex":
        notes.append(
            "--moe-token-dispatcher-type flex runs DeepEP: install it (NVIDIA's NeMo and "
            "Megatron containers ship it), or pass moe_dispatcher='alltoall' to plan without it"
        )
    uses_rope = model.multi_latent_attention or model.position_embedding_type in ("rope", "yarn")
    if uses_rope and model.rotary_base is None:
        notes.append(
            "the model spec sets no rotary_base, so Megatron uses its default RoPE theta 10000; "
            "pass --rotary-base if the model was trained with another theta"
        )
    return LaunchSpec(args=args, env=env, command=command, notes=notes)
