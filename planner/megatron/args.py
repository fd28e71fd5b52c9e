"""Read back a Megatron-LM argv: :func:`parse_megatron_args` parses the flags
:func:`planner.megatron.flags.megatron_args` emits, so that tests can check that the generated
flags describe the same layout and model."""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from planner.megatron.flag_values import FlagParser, refuse, strict_numbers
from planner.megatron.memory_flags import (
    add_memory_arguments,
    fp8_param_gather_on,
    layout_vpp,
    parsed_memory_fields,
)
from planner.megatron.stack_flags import add_stack_arguments, parsed_stack_fields
from planner.megatron.variant_flags import add_variant_arguments, parsed_variant_fields
from planner.plain_numbers import SIGNED_WHOLE
from planner.specs import Layout, OptimizerSharding, Recompute, SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedArgs:
    """What a Megatron argv (as emitted by :func:`megatron_args`) says."""

    layout: Layout
    seq_length: int
    global_batch_size: int
    precision: str
    model_fields: dict[str, Any]
    """ModelSpec keyword arguments (everything but ``name`` and ``sources``)."""
    stack_fields: dict[str, Any] = field(default_factory=dict)
    """TrainingJob software-stack keyword arguments (planner.stack_settings)."""


def _parser() -> FlagParser:
    # a bad value is a SpecError naming the flag, never a usage dump and exit (flag_values.py)
    p = FlagParser(prog="pretrain_gpt.py", add_help=False, allow_abbrev=False)
    ints = {
        "--tensor-model-parallel-size": 1, "--pipeline-model-parallel-size": 1,
        "--context-parallel-size": 1, "--expert-model-parallel-size": 1,
        "--expert-tensor-parallel-size": None, "--num-virtual-stages-per-pipeline-rank": None,
        "--micro-batch-size": None, "--global-batch-size": None, "--seq-length": None,
        "--max-position-embeddings": None, "--num-layers": None, "--hidden-size": None,
        "--ffn-hidden-size": None, "--num-attention-heads": None, "--num-query-groups": 1,
        "--kv-channels": None, "--vocab-size": None, "--make-vocab-size-divisible-by": 128,
        "--num-experts": None, "--moe-router-topk": 2, "--moe-ffn-hidden-size": None,
        "--moe-shared-expert-intermediate-size": None, "--q-lora-rank": None,
        "--kv-lora-rank": 32, "--qk-head-dim": 128, "--qk-pos-emb-head-dim": 64,
        "--v-head-dim": 128, "--mtp-num-layers": None, "--recompute-num-layers": None,
        "--num-layers-per-virtual-pipeline-stage": None,
        "--decoder-first-pipeline-num-layers": None, "--decoder-last-pipeline-num-layers": None,
    }  # fmt: skip
    for flag, default in ints.items():
        p.add_argument(flag, type=int, default=default)
    for flag in ("--hidden-dropout", "--attention-dropout"):
        p.add_argument(flag, type=float, default=0.1)
    # rotary flags: None where the planner leaves Megatron's default (10000, 1.0 and 0.0)
    for flag in ("--rotary-base", "--rotary-scaling-factor", "--mscale", "--mscale-all-dim"):
        p.add_argument(flag, type=float, default=None)
    p.add_argument("--rotary-percent", type=float, default=1.0)
    p.add_argument("--rope-scaling-factor", type=float, default=8.0)
    p.add_argument("--rope-type", choices=("rope", "yarn"), default=None)
    for flag in (
        "--sequence-parallel", "--tp-comm-overlap", "--use-distributed-optimizer",
        "--use-torch-fsdp2",
        "--overlap-grad-reduce", "--overlap-param-gather", "--group-query-attention",
        "--untie-embeddings-and-output-weights", "--disable-bias-linear",
        "--add-qkv-bias", "--qk-layernorm", "--moe-grouped-gemm", "--multi-latent-attention",
        "--bf16", "--recompute-activations", "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split", "--moe-router-pre-softmax",
        "--use-rope-scaling", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
        "--fp8-param-gather",
    ):  # fmt: skip
        p.add_argument(flag, action="store_true")
    p.add_argument("--normalization", choices=("LayerNorm", "RMSNorm"), default="LayerNorm")
    p.add_argument("--position-embedding-type", default="learned_absolute")
    p.add_argument("--moe-layer-freq", default="1")
    p.add_argument("--moe-token-dispatcher-type", choices=("allgather", "alltoall", "flex"),
                   default="allgather")  # fmt: skip
    p.add_argument("--moe-flex-dispatcher-backend", default=None)
    p.add_argument("--cp-comm-type", nargs="+", default=None)  # one, or one per layer
    p.add_argument("--hierarchical-context-parallel-sizes", nargs="+", type=int, default=None)
    p.add_argument("--recompute-granularity", choices=("full", "selective"), default=None)
    p.add_argument("--recompute-method", choices=("uniform", "block"), default=None)
    p.add_argument("--fp8-format", choices=("e4m3", "hybrid"), default=None)
    p.add_argument("--fp8-recipe", default="delayed")
    p.add_argument("--attention-backend", default=None)  # absent: env or auto (stack_flags)
    add_stack_arguments(p)
    add_memory_arguments(p)
    add_variant_arguments(p)
    strict_numbers(p)  # every int/float flag: plain decimal, in its range
    return p


_LIST_RUN = re.compile(r"\[([01])\]\s*\*\s*([0-9]+)")  # [0-9]: \d takes "٣"


def _parse_moe_layer_freq(text: str, num_layers: int) -> tuple[int, int]:
    """(moe_layer_freq, moe_first_dense_layers) equivalent to a ``--moe-layer-freq`` value."""
    if SIGNED_WHOLE.fullmatch(text.strip()):  # not str.isdigit: that takes "٣"
        if int(text) < 1:
            refuse("--moe-layer-freq", f"{text} must be >= 1 (1: every layer is MoE)")
        return int(text), 0
    runs = _LIST_RUN.findall(text)
    pattern = [int(bit) for bit, count in runs for _ in range(int(count))] if runs else _bits(text)
    if len(pattern) != num_layers:
        raise SpecError(
            f"--moe-layer-freq lists {len(pattern)} layers, --num-layers is {num_layers}",
            field="moe_layer_freq",
        )
    first = pattern.index(1) if 1 in pattern else num_layers
    for freq in range(1, num_layers + 1):
        if pattern == [int(i >= first and i % freq == 0) for i in range(num_layers)]:
            return freq, first
    raise SpecError(
        f"--moe-layer-freq {text} is not 'leading dense layers then every N-th layer'",
        field="moe_layer_freq",
    )


def _bits(text: str) -> list[int]:
    """A ``--moe-layer-freq`` list such as ``[0,1,1,1]``: 0/1 per layer, else a SpecError."""
    try:
        bits = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        bits = None
    if not isinstance(bits, list | tuple) or any(b not in (0, 1) or b is True for b in bits):
        refuse("--moe-layer-freq", f"{text!r} is not a layer frequency: give N (every N-th layer "
               "is MoE) or a 0/1 list per layer such as ([0]*3+[1]*29)")  # fmt: skip
    return [int(b) for b in bits]


def _cp_comm_type(values: list[str] | None, cp: int) -> Any:
    """``--cp-comm-type``: one type for every layer. Absent with cp > 1 it is Megatron's default,
    p2p (megatron-facts §1), stated as such: None would read as "the planner's choice" and an
    argv fed back could then be priced with another type. A per-layer mix is not a planner
    layout (megatron-facts: one value = all layers, else one per layer)."""
    if not values:
        return "p2p" if cp > 1 else None
    kinds = sorted(set(values))
    if len(kinds) > 1:
        raise SpecError(
            f"--cp-comm-type mixes {', '.join(kinds)} across layers; the planner prices one type "
            "for every layer: pass a single value",
            field="cp_comm_type",
        )
    return kinds[0]  # Layout checks TE's spellings (p2p, all_gather, a2a, a2a+p2p)


def _vpp(ns: argparse.Namespace, pp: int) -> int:
    """Virtual stages per rank from whichever VPP flag the argv uses (megatron-facts rule 7)."""
    if ns.num_layers_per_virtual_pipeline_stage:  # v = (L + [emb] + [loss]) / (p N) (rule 9)
        counted: int = ns.num_layers + ns.account_for_embedding_in_pipeline_split
        counted += ns.account_for_loss_in_pipeline_split
        per_stage: int = ns.num_layers_per_virtual_pipeline_stage
        if counted % pp:  # Megatron's validate_args refuses both (rules 8 and 9)
            refuse("--pipeline-model-parallel-size", f"{pp} must divide the {counted} layers")
        if (counted // pp) % per_stage:
            refuse("--num-layers-per-virtual-pipeline-stage", f"{per_stage} must divide the "
                   f"{counted // pp} layers of each pipeline rank")  # fmt: skip
        return counted // (pp * per_stage)
    vpp = layout_vpp(ns.pipeline_model_parallel_layout, pp)
    return vpp or ns.num_virtual_stages_per_pipeline_rank or 1


def _model_fields(ns: argparse.Namespace) -> dict[str, Any]:
    """The ModelSpec fields an argv states (MoE layer pattern, MLA and YaRN read as Megatron
    reads them)."""
    freq, first_dense = (1, 0)
    if ns.num_experts is not None:
        freq, first_dense = _parse_moe_layer_freq(ns.moe_layer_freq, ns.num_layers)
    mla = ns.multi_latent_attention
    # YaRN settings are read by MLA (unless --rope-type rope) and by --position-embedding-type yarn
    yarn = (mla and ns.rope_type != "rope") or (not mla and ns.position_embedding_type == "yarn")
    return {
        "num_layers": ns.num_layers,
        "hidden_size": ns.hidden_size,
        "ffn_hidden_size": ns.ffn_hidden_size,
        "num_attention_heads": ns.num_attention_heads,
        "vocab_size": ns.vocab_size,
        "num_query_groups": ns.num_query_groups if ns.group_query_attention else None,
        "kv_channels": ns.kv_channels,
        "max_position_embeddings": ns.max_position_embeddings,
        "normalization": ns.normalization,
        "position_embedding_type": ns.position_embedding_type,
        "untie_embeddings_and_output_weights": ns.untie_embeddings_and_output_weights,
        "add_bias_linear": not ns.disable_bias_linear,
        "add_qkv_bias": ns.add_qkv_bias,
        "qk_layernorm": ns.qk_layernorm,
        "hidden_dropout": ns.hidden_dropout,
        "attention_dropout": ns.attention_dropout,
        "num_experts": ns.num_experts,
        "moe_router_topk": ns.moe_router_topk,
        "moe_ffn_hidden_size": ns.moe_ffn_hidden_size,
        "moe_shared_expert_intermediate_size": ns.moe_shared_expert_intermediate_size,
        "moe_layer_freq": freq,
        "moe_first_dense_layers": first_dense,
        "multi_latent_attention": mla,
        "q_lora_rank": ns.q_lora_rank if mla else None,
        "kv_lora_rank": ns.kv_lora_rank if mla else None,
        "qk_head_dim": ns.qk_head_dim if mla else None,
        "qk_pos_emb_head_dim": ns.qk_pos_emb_head_dim if mla else None,
        "v_head_dim": ns.v_head_dim if mla else None,
        "mtp_num_layers": ns.mtp_num_layers or 0,
        "rotary_base": ns.rotary_base,
        "rotary_percent": ns.rotary_percent,
        "use_rope_scaling": ns.use_rope_scaling,
        "rope_scaling_factor": ns.rope_scaling_factor,
        "rotary_scaling_factor": ns.rotary_scaling_factor if yarn else None,
        "mscale": ns.mscale if yarn else None,
        "mscale_all_dim": ns.mscale_all_dim if yarn else None,
        **parsed_variant_fields(ns),  # activation, sliding window, softmax type
    }


def parse_megatron_args(
    argv: Sequence[str],
    *,
    world_size: int | None = None,
    strict: bool = True,
    env: Mapping[str, str] | None = None,
) -> ParsedArgs:
    """Parse Megatron flags (those :func:`megatron_args` emits, and the usual aliases).
    ``dp = world_size / (tp pp cp)`` (megatron-facts §3.1); without ``world_size`` dp is 1.
    ``strict`` rejects flags this parser does not know; pass False to read a full launch script
    and ignore its data, optimizer and logging flags. ``env``: the launch environment, read for
    what an older release sets there (the attention backend before core 0.11)."""
    ns, unknown = _parser().parse_flags(argv)
    if unknown and strict:
        raise SpecError(f"unknown Megatron flags: {' '.join(unknown)}")
    tp, pp = ns.tensor_model_parallel_size, ns.pipeline_model_parallel_size
    cp = ns.context_parallel_size
    world = tp * pp * cp if world_size is None else world_size
    if world % (tp * pp * cp):
        raise SpecError(
            f"world_size={world} is not divisible by tp*pp*cp = {tp * pp * cp}",
            field="world_size",
        )
    vpp = _vpp(ns, pp)
    precision = "fp8" if ns.fp8_format else "fp16" if ns.fp16 else "bf16"
    recompute: Recompute = "none"
    if ns.recompute_granularity == "selective" or ns.recompute_activations:
        recompute = "selective"
    elif ns.recompute_granularity == "full":
        recompute = "full"
    sharding: OptimizerSharding = (
        "full" if ns.use_torch_fsdp2 else "optimizer" if ns.use_distributed_optimizer else "none"
    )
    layout = Layout(
        tp=tp, pp=pp, vpp=vpp, cp=cp, cp_comm_type=_cp_comm_type(ns.cp_comm_type, cp),
        ep=ns.expert_model_parallel_size, etp=ns.expert_tensor_parallel_size or tp,
        dp=world // (tp * pp * cp), micro_batch_size=ns.micro_batch_size,
        recompute=recompute, sequence_parallel=ns.sequence_parallel and tp > 1,
        optimizer_sharding=sharding, moe_a2a_overlap=ns.overlap_moe_expert_parallel_comm,
        moe_dispatcher=(
            None if ns.num_experts is None
            else "flex" if ns.moe_token_dispatcher_type == "flex" else "alltoall"
        ),
        **parsed_memory_fields(ns, precision),
    )  # fmt: skip
    if precision == "fp8" and ns.fp8_param_gather != fp8_param_gather_on(precision, layout):
        layout = replace(layout, fp8_param_gather=ns.fp8_param_gather)  # differs from auto
    return ParsedArgs(
        layout=layout,
        seq_length=ns.seq_length,
        global_batch_size=ns.global_batch_size,
        precision=precision,
        model_fields=_model_fields(ns),
        # --fp8-recipe means something only with --fp8-format (its default: delayed, §1.8)
        stack_fields=parsed_stack_fields(ns, env)
        | ({"fp8_recipe": ns.fp8_recipe} if precision == "fp8" else {}),
    )
