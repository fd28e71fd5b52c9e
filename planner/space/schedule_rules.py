"""Megatron's rules on how a layout cuts the work: the pipeline split and the interleaved
schedule (megatron-facts §2.2), the batch into microbatches (§2.6), the sequence over cp and tp
(§2.3-2.4), Torch-FSDP2's limits (§2.8), the learned position table (§2.3), and the MoE
communication settings that the parallel sizes gate (§2.5, :mod:`planner.space.comm_flags`).

Each check/explain pair implements one rule; the rule number is in :data:`SCHEDULE_RULES`. They
follow :data:`planner.space.shape_rules.SHAPE_RULES` in :data:`planner.space.rules.RULES`.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import A2A_ON, DISPATCH_FLEX, SHARD_FULL, BoolArray
from planner.model.pipeline import split_arrays
from planner.space import comm_flags
from planner.space.memory_rules import has_layout
from planner.space.rule_context import Rule, RuleContext, rule, unbroken, valid_values
from planner.space.version_rules import split_exists, split_lacking, split_release_note

__all__ = ["SCHEDULE_RULES"]


def _pp_check(ctx: RuleContext) -> BoolArray:
    # an even, account-for or uneven split exists in the job's release (rules 8-13; layout: 14)
    split = split_arrays(ctx.model.num_layers, ctx.batch, split_lacking(ctx.job)).method
    bad: BoolArray = (ctx.batch.vpp == 1) & (split < 0) & ~has_layout(ctx)
    return bad


def _pp_explain(ctx: RuleContext, i: int) -> str:
    n, pp, m, j = ctx.model.num_layers, ctx.value("pp", i), ctx.model, ctx.job
    ok = valid_values(ctx, lambda p: split_exists(m, j, p, 1), min(n, ctx.cluster.num_gpus))
    return (
        f"pp={pp} cannot split num_layers={n}: Megatron needs pp to divide "
        f"{n}, or {n}+2 with the embedding and loss counted as layers, or an uneven first/last "
        f"stage with the middle stages even{split_release_note(m, j, pp, 1)}; valid pp: {ok}"
    )


def _vpp_pp_check(ctx: RuleContext) -> BoolArray:
    bad: BoolArray = (ctx.batch.vpp > 1) & (ctx.batch.pp <= 1)
    return bad


def _vpp_pp_explain(ctx: RuleContext, i: int) -> str:
    return f"vpp={ctx.value('vpp', i)} needs pp > 1; set vpp=1 or pp >= 2"


def _vpp_layers_check(ctx: RuleContext) -> BoolArray:
    split = split_arrays(ctx.model.num_layers, ctx.batch, split_lacking(ctx.job)).method
    bad: BoolArray = (ctx.batch.vpp > 1) & (ctx.batch.pp > 1) & (split < 0) & ~has_layout(ctx)
    return bad


def _vpp_layers_explain(ctx: RuleContext, i: int) -> str:
    m, j, pp, vpp = ctx.model, ctx.job, ctx.value("pp", i), ctx.value("vpp", i)
    ok = valid_values(ctx, lambda v: split_exists(m, j, pp, v), max(m.num_layers // max(pp, 1), 1))
    return (
        f"vpp={vpp} cannot split num_layers={m.num_layers} over pp={pp} ranks: every virtual "
        f"stage needs a whole number of layers{split_release_note(m, j, pp, vpp)}; valid vpp: {ok}"
    )


def _batch_check(ctx: RuleContext) -> BoolArray:
    # B mod (b d) = 0 and m >= 1 (megatron-facts §2.6 rules 44-45)
    bad: BoolArray = ctx.microbatches < 1
    return bad


def _batch_explain(ctx: RuleContext, i: int) -> str:
    b, dp, gb = ctx.value("micro_batch_size", i), ctx.value("dp", i), ctx.job.global_batch_size
    ok = valid_values(ctx, lambda v: gb % (v * max(dp, 1)) == 0, gb)
    return (
        f"global_batch_size={gb} must be a positive multiple of micro_batch_size*dp = "
        f"{b}*{dp} = {b * dp}; valid micro_batch_size with dp={dp}: {ok}"
    )


def _vpp_m_check(ctx: RuleContext) -> BoolArray:
    # interleaved 1F1B with group size p: m mod p = 0 and m >= p (megatron-facts rule 15)
    m, pp = ctx.microbatches, ctx.col("pp")
    bad: BoolArray = (ctx.batch.vpp > 1) & (m > 0) & ((m % pp != 0) | (m < pp))
    return bad


def _vpp_m_explain(ctx: RuleContext, i: int) -> str:
    pp = ctx.value("pp", i)
    return (
        f"the interleaved pipeline (vpp={ctx.value('vpp', i)}) needs the microbatch count "
        f"m = B/(b*dp) = {int(ctx.microbatches[i])} to be a multiple of pp={pp} and at least "
        f"{pp}; lower micro_batch_size or dp, or set vpp=1"
    )


def _cp_check(ctx: RuleContext) -> BoolArray:
    cp = ctx.col("cp")
    bad: BoolArray = (cp > 1) & (ctx.job.seq_length % (2 * cp) != 0)
    return bad


def _cp_explain(ctx: RuleContext, i: int) -> str:
    s, cp = ctx.job.seq_length, ctx.value("cp", i)
    return (
        f"seq_length={s} must be divisible by 2*cp = {2 * cp}; "
        f"valid cp: {valid_values(ctx, lambda c: c == 1 or s % (2 * c) == 0)}"
    )


def _sp_tp_check(ctx: RuleContext) -> BoolArray:
    bad: BoolArray = ctx.batch.sequence_parallel & (ctx.batch.tp <= 1)
    return bad


def _sp_tp_explain(ctx: RuleContext, i: int) -> str:
    return "sequence_parallel needs tp > 1 (Megatron turns it off at tp=1); set it false"


def _sp_seq_check(ctx: RuleContext) -> BoolArray:
    # (s / c) mod t = 0 with sequence parallelism (megatron-facts rule 22)
    split = ctx.col("cp") * ctx.col("tp")
    bad: BoolArray = ctx.batch.sequence_parallel & (ctx.job.seq_length % split != 0)
    return bad


def _sp_seq_explain(ctx: RuleContext, i: int) -> str:
    s, cp, tp = ctx.job.seq_length, ctx.value("cp", i), ctx.value("tp", i)
    return (
        f"with sequence parallelism seq_length/cp = {s}/{cp} must be divisible by tp={tp}; "
        "choose a sequence length divisible by tp*cp or turn sequence_parallel off"
    )


def _moe_sp_check(ctx: RuleContext) -> BoolArray:
    if not ctx.model.is_moe:
        return unbroken(ctx)
    bad: BoolArray = (ctx.batch.tp > 1) & ~ctx.batch.sequence_parallel
    return bad


def _moe_sp_explain(ctx: RuleContext, i: int) -> str:
    return (
        f"a mixture-of-experts model with tp={ctx.value('tp', i)} needs sequence_parallel "
        "(Megatron's MoE layer raises without it); turn sequence_parallel on"
    )


def _fsdp(ctx: RuleContext) -> BoolArray:
    on: BoolArray = ctx.batch.optimizer_sharding == SHARD_FULL
    return on


def _fsdp_pp_check(ctx: RuleContext) -> BoolArray:
    bad: BoolArray = _fsdp(ctx) & (ctx.batch.pp > 1)
    return bad


def _fsdp_pp_explain(ctx: RuleContext, i: int) -> str:
    return (
        f"optimizer_sharding='full' (Torch-FSDP2) needs pp=1, got pp={ctx.value('pp', i)}; "
        "use optimizer_sharding='optimizer' or pp=1"
    )


def _fsdp_ep_check(ctx: RuleContext) -> BoolArray:
    bad: BoolArray = _fsdp(ctx) & (ctx.batch.ep > 1)
    return bad


def _fsdp_ep_explain(ctx: RuleContext, i: int) -> str:
    return (
        f"optimizer_sharding='full' (Torch-FSDP2) needs ep=1, got ep={ctx.value('ep', i)}; "
        "use optimizer_sharding='optimizer' or ep=1"
    )


def _fsdp_tied_check(ctx: RuleContext) -> BoolArray:
    if ctx.model.untie_embeddings_and_output_weights:
        return unbroken(ctx)
    return _fsdp(ctx)


def _fsdp_tied_explain(ctx: RuleContext, i: int) -> str:
    return (
        f"optimizer_sharding='full' (Torch-FSDP2) needs untied embeddings and {ctx.model.name} "
        "ties them; use optimizer_sharding='optimizer'"
    )


def _positions_check(ctx: RuleContext) -> BoolArray:
    limit = ctx.model.max_position_embeddings
    learned = ctx.model.position_embedding_type == "learned_absolute"
    if learned and limit is not None and ctx.job.seq_length > limit:
        return np.ones(len(ctx.batch), dtype=np.bool_)
    return unbroken(ctx)


def _positions_explain(ctx: RuleContext, i: int) -> str:
    limit = ctx.model.max_position_embeddings
    return (
        f"seq_length={ctx.job.seq_length} exceeds the learned position table "
        f"max_position_embeddings={limit}; use seq_length <= {limit}"
    )


def _a2a_check(ctx: RuleContext) -> BoolArray:
    requested = ctx.batch.moe_a2a_overlap == A2A_ON
    blocked: BoolArray = requested & ~comm_flags.allowed_for(ctx)
    return blocked


def _a2a_explain(ctx: RuleContext, i: int) -> str:
    why = comm_flags.reasons_for(ctx, i)
    return f"moe_a2a_overlap=true cannot be used here: {'; '.join(why)}; or leave it unset"


def _flex_check(ctx: RuleContext) -> BoolArray:
    requested = ctx.batch.moe_dispatcher == DISPATCH_FLEX
    blocked: BoolArray = requested & ~comm_flags.flex_allowed(ctx.model, ctx.cluster, ctx.batch)
    return blocked


def _flex_explain(ctx: RuleContext, i: int) -> str:
    gpu = ctx.cluster.gpu
    return (
        f"moe_dispatcher='flex' (DeepEP) needs an MoE model with ep > 1 on an NVIDIA Hopper or "
        f"Blackwell GPU; here ep={ctx.value('ep', i)} on {gpu.name} ({gpu.architecture}); use "
        "'alltoall' or leave it unset"
    )


_S = "megatron-facts §2."
SCHEDULE_RULES: tuple[Rule, ...] = (
    rule("layers_split_by_pp", "pp must split num_layers into pipeline stages",
         _S + "2 rule 8", _pp_check, _pp_explain),
    rule("vpp_needs_pp", "vpp > 1 needs pp > 1",
         _S + "2 rule 11", _vpp_pp_check, _vpp_pp_explain),
    rule("layers_split_by_pp_vpp", "vpp must split each pipeline stage's layers evenly",
         _S + "2 rule 10", _vpp_layers_check, _vpp_layers_explain),
    rule("global_batch_divisible",
         "global_batch_size must be a positive multiple of micro_batch_size*dp",
         _S + "6 rules 44-45", _batch_check, _batch_explain),
    rule("vpp_microbatches",
         "with vpp > 1 the microbatch count must be a multiple of pp and at least pp",
         _S + "2 rule 15", _vpp_m_check, _vpp_m_explain),
    rule("seq_divisible_by_2cp", "seq_length must be divisible by 2*cp",
         _S + "3 rule 21", _cp_check, _cp_explain),
    rule("sp_needs_tp", "sequence_parallel needs tp > 1",
         _S + "4 rule 28", _sp_tp_check, _sp_tp_explain),
    rule("sp_seq_divisible_by_tp", "with sequence parallelism seq_length/cp must divide by tp",
         _S + "3 rule 22", _sp_seq_check, _sp_seq_explain),
    rule("moe_tp_needs_sp", "a MoE model with tp > 1 needs sequence_parallel",
         _S + "5 rule 33", _moe_sp_check, _moe_sp_explain),
    rule("fsdp_no_pp", "optimizer_sharding='full' (Torch-FSDP2) needs pp=1",
         _S + "8 rule 58", _fsdp_pp_check, _fsdp_pp_explain),
    rule("fsdp_no_ep", "optimizer_sharding='full' (Torch-FSDP2) needs ep=1",
         _S + "8 rule 58", _fsdp_ep_check, _fsdp_ep_explain),
    rule("fsdp_needs_untied_embeddings",
         "optimizer_sharding='full' (Torch-FSDP2) needs untied embeddings",
         _S + "8 rule 58", _fsdp_tied_check, _fsdp_tied_explain),
    rule("seq_within_learned_positions",
         "seq_length must not exceed a learned max_position_embeddings",
         _S + "3 rule 23", _positions_check, _positions_explain),
    rule("moe_a2a_overlap_allowed",
         "moe_a2a_overlap needs ep > 1, no full recompute or 'moe' recompute module, MTP depth "
         "<= 1, vpp > 1 with pp > 1 and (planner policy, before Blackwell) no --tp-comm-overlap",
         _S + "5 rule 40, §2.2 rule 16; planner.space.comm_flags", _a2a_check, _a2a_explain),
    rule("moe_flex_dispatcher_supported",
         "moe_dispatcher='flex' (DeepEP) needs ep > 1 on NVIDIA Hopper or Blackwell",
         "megatron-facts §1.5; performance-facts §5.1", _flex_check, _flex_explain),
)  # fmt: skip
