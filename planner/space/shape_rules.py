"""Megatron's rules on the layout's shape: the parallel sizes against the GPU count, the GPU's
precision support, and how the attention heads, the FFN and the experts divide over tp, ep and etp
(megatron-facts §2.1, §2.3, §2.5).

Each check/explain pair implements one rule; the rule number is in :data:`SHAPE_RULES`. They are
the first rules of :data:`planner.space.rules.RULES`, whose order decides which reason a rejected
layout shows first.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import BoolArray
from planner.space.rule_context import Rule, RuleContext, rule, unbroken, valid_values
from planner.specs import ModelSpec

__all__ = ["SHAPE_RULES"]


def _sizes_check(ctx: RuleContext) -> BoolArray:
    b = ctx.batch
    cols = (b.tp, b.pp, b.vpp, b.cp, b.ep, b.etp, b.dp, b.micro_batch_size)
    bad: BoolArray = np.logical_or.reduce([c < 1 for c in cols])
    return bad


def _sizes_explain(ctx: RuleContext, i: int) -> str:
    names = ("tp", "pp", "vpp", "cp", "ep", "etp", "dp", "micro_batch_size")
    bad = [f"{n}={ctx.value(n, i)}" for n in names if ctx.value(n, i) < 1]
    return f"{', '.join(bad)}: every parallel size and the micro batch must be >= 1"


def _world_check(ctx: RuleContext) -> BoolArray:
    # W = t p c d (megatron-facts §2.1 rules 1-2; §9 item 1)
    bad: BoolArray = ctx.batch.num_gpus != ctx.cluster.num_gpus
    return bad


def _world_explain(ctx: RuleContext, i: int) -> str:
    tp, pp, cp, dp = (ctx.value(n, i) for n in ("tp", "pp", "cp", "dp"))
    w = ctx.cluster.num_gpus
    head = f"tp*pp*cp*dp = {tp}*{pp}*{cp}*{dp} = {tp * pp * cp * dp} must equal num_gpus={w}"
    mp = max(tp * pp * cp, 1)
    if w % mp == 0:
        return f"{head}; with tp={tp}, pp={pp}, cp={cp} use dp={w // mp}"
    return f"{head}; tp*pp*cp = {mp} does not divide {w}, choose sizes whose product divides it"


def _fp8_check(ctx: RuleContext) -> BoolArray:
    if ctx.job.precision == "fp8" and ctx.cluster.gpu.peak_fp8_flop_per_s is None:
        return np.ones(len(ctx.batch), dtype=np.bool_)
    return unbroken(ctx)


def _fp8_explain(ctx: RuleContext, i: int) -> str:
    return (
        f"precision='fp8' needs fp8 tensor cores and {ctx.cluster.gpu.name} has none; "
        "use precision='bf16'"
    )


def _heads_check(ctx: RuleContext) -> BoolArray:
    bad: BoolArray = ctx.model.num_attention_heads % ctx.col("tp") != 0
    return bad


def _heads_explain(ctx: RuleContext, i: int) -> str:
    a = ctx.model.num_attention_heads
    return (
        f"tp={ctx.value('tp', i)} must divide num_attention_heads={a}; "
        f"valid tp: {valid_values(ctx, lambda t: a % t == 0, min(a, ctx.cluster.num_gpus))}"
    )


def _groups_check(ctx: RuleContext) -> BoolArray:
    if ctx.model.num_query_groups is None:
        return unbroken(ctx)
    g, t = ctx.model.num_query_groups, ctx.col("tp")
    bad: BoolArray = (g % t != 0) & (t % g != 0)
    return bad


def _groups_explain(ctx: RuleContext, i: int) -> str:
    a, g = ctx.model.num_attention_heads, ctx.model.query_groups
    ok = valid_values(ctx, lambda t: a % t == 0 and (g % t == 0 or t % g == 0), a)
    return (
        f"tp={ctx.value('tp', i)} and num_query_groups={g}: one must divide the other "
        f"(KV heads are split or replicated over tp); valid tp: {ok}"
    )


def _has_dense_mlp(model: ModelSpec) -> bool:
    return model.num_dense_layers > 0


def _ffn_check(ctx: RuleContext) -> BoolArray:
    if not _has_dense_mlp(ctx.model):
        return unbroken(ctx)
    bad: BoolArray = ctx.model.ffn_hidden_size % ctx.col("tp") != 0
    return bad


def _ffn_explain(ctx: RuleContext, i: int) -> str:
    f = ctx.model.ffn_hidden_size
    return (
        f"tp={ctx.value('tp', i)} must divide ffn_hidden_size={f}; "
        f"valid tp: {valid_values(ctx, lambda t: f % t == 0)}"
    )


def _shared_check(ctx: RuleContext) -> BoolArray:
    fs = ctx.model.shared_expert_ffn_hidden_size
    if not ctx.model.is_moe or fs == 0:
        return unbroken(ctx)
    bad: BoolArray = fs % ctx.col("tp") != 0
    return bad


def _shared_explain(ctx: RuleContext, i: int) -> str:
    fs = ctx.model.shared_expert_ffn_hidden_size
    return (
        f"tp={ctx.value('tp', i)} must divide moe_shared_expert_intermediate_size={fs}; "
        f"valid tp: {valid_values(ctx, lambda t: fs % t == 0)}"
    )


def _ep_dense_check(ctx: RuleContext) -> BoolArray:
    if ctx.model.is_moe:
        return unbroken(ctx)
    bad: BoolArray = ctx.batch.ep > 1
    return bad


def _ep_dense_explain(ctx: RuleContext, i: int) -> str:
    return (
        f"ep={ctx.value('ep', i)} needs a mixture-of-experts model and {ctx.model.name} is "
        "dense; use ep=1"
    )


def _experts_check(ctx: RuleContext) -> BoolArray:
    if not ctx.model.is_moe:
        return unbroken(ctx)
    bad: BoolArray = (ctx.model.num_experts or 1) % ctx.col("ep") != 0
    return bad


def _experts_explain(ctx: RuleContext, i: int) -> str:
    e = ctx.model.num_experts or 1
    return (
        f"ep={ctx.value('ep', i)} must divide num_experts={e}; "
        f"valid ep: {valid_values(ctx, lambda v: e % v == 0, e)}"
    )


def _expert_ffn_check(ctx: RuleContext) -> BoolArray:
    if not ctx.model.is_moe:
        return unbroken(ctx)
    bad: BoolArray = ctx.model.expert_ffn_hidden_size % ctx.col("etp") != 0
    return bad


def _expert_ffn_explain(ctx: RuleContext, i: int) -> str:
    fe = ctx.model.expert_ffn_hidden_size
    return (
        f"etp={ctx.value('etp', i)} must divide the expert ffn size "
        f"moe_ffn_hidden_size={fe}; valid etp: {valid_values(ctx, lambda t: fe % t == 0)}"
    )


def _grid_check(ctx: RuleContext) -> BoolArray:
    if not ctx.model.is_moe:
        return unbroken(ctx)
    # (t c d) mod (t_e e) = 0, i.e. W mod (t_e e p) = 0 (megatron-facts §2.1 rule 3)
    dense = ctx.col("tp") * ctx.col("cp") * ctx.col("dp")
    bad: BoolArray = dense % (ctx.col("etp") * ctx.col("ep")) != 0
    return bad


def _grid_explain(ctx: RuleContext, i: int) -> str:
    tp, cp, dp, ep, etp = (ctx.value(n, i) for n in ("tp", "cp", "dp", "ep", "etp"))
    dense, e = tp * cp * dp, ctx.model.num_experts or 1
    ok = valid_values(ctx, lambda v: e % v == 0 and dense % (etp * v) == 0, e)
    return (
        f"tp*cp*dp = {tp}*{cp}*{dp} = {dense} must be divisible by etp*ep = {etp}*{ep} = "
        f"{etp * ep} (the expert grid folds tp, cp and dp); valid ep with etp={etp}: {ok}"
    )


def _bias_check(ctx: RuleContext) -> BoolArray:
    if not (ctx.model.is_moe and ctx.model.add_bias_linear):
        return unbroken(ctx)
    bad: BoolArray = ctx.batch.etp != 1
    return bad


def _bias_explain(ctx: RuleContext, i: int) -> str:
    return (
        f"{ctx.model.name} has linear biases, which Megatron's MoE layers support only with "
        f"etp=1 (got etp={ctx.value('etp', i)}); set etp=1"
    )


_S = "megatron-facts §2."
SHAPE_RULES: tuple[Rule, ...] = (
    rule("sizes_positive", "every parallel size and micro_batch_size must be >= 1",
         _S + "1 rule 2", _sizes_check, _sizes_explain),
    rule("world_size", "tp*pp*cp*dp must equal the number of GPUs",
         _S + "1 rules 1-2", _world_check, _world_explain),
    rule("fp8_needs_gpu_support", "fp8 training needs a GPU with fp8 tensor cores",
         "megatron-facts §1.8", _fp8_check, _fp8_explain),
    rule("heads_divisible_by_tp", "tp must divide num_attention_heads",
         _S + "3 rule 17", _heads_check, _heads_explain),
    rule("query_groups_vs_tp", "num_query_groups must be a multiple or a divisor of tp",
         _S + "3 rule 18", _groups_check, _groups_explain),
    rule("ffn_divisible_by_tp", "tp must divide ffn_hidden_size",
         _S + "3 rule 20", _ffn_check, _ffn_explain),
    rule("shared_expert_ffn_divisible_by_tp",
         "tp must divide moe_shared_expert_intermediate_size",
         _S + "3 rule 20", _shared_check, _shared_explain),
    rule("ep_needs_experts", "ep > 1 needs a mixture-of-experts model",
         _S + "5 rule 31", _ep_dense_check, _ep_dense_explain),
    rule("experts_divisible_by_ep", "ep must divide num_experts",
         _S + "5 rule 32", _experts_check, _experts_explain),
    rule("expert_ffn_divisible_by_etp", "etp must divide the expert ffn size",
         _S + "3 rule 20", _expert_ffn_check, _expert_ffn_explain),
    rule("expert_grid_divisible", "etp*ep must divide tp*cp*dp (the expert grid)",
         _S + "1 rule 3", _grid_check, _grid_explain),
    rule("moe_bias_needs_etp1", "a MoE model with linear biases needs etp=1",
         _S + "5 rule 34", _bias_check, _bias_explain),
)  # fmt: skip
