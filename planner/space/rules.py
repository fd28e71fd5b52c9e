"""Megatron-LM's validation rules, checked for many layouts at once.

Each :class:`Rule` is one rule of megatron-facts §2 that a layout of a given model, cluster and
job can break. :func:`check_rules` evaluates all of them over a :class:`LayoutBatch` with numpy
(no Python loop over layouts); :func:`violations` explains the broken ones for a single layout
with the offending values and a fix.

Choices that are the planner's, not Megatron's:

* the pipeline split is the first of even, account-for-embedding-and-loss, or uneven first/last
  stages that Megatron accepts (``planner.model.pipeline``, rules 8-13);
* ``optimizer_sharding='full'`` is emitted as Torch-FSDP2 (``--use-torch-fsdp2``), so rule 58
  applies: no pipeline or expert parallelism and untied embeddings;
* ``sequence_parallel`` with ``tp=1`` is rejected: Megatron silently turns it off (rule 28), so
  such a layout would not be what it says;
* ``max_position_embeddings`` is emitted as ``max(model value, seq_length)``, so rule 23 only
  rejects a sequence longer than a *learned* position table, which cannot be stretched;
* ``tp * cp`` spanning nodes is legal; the performance model charges for it, the rules do not.

Rules are ordered from the most fundamental (world size, head split) to the most specific, so
that the first violated rule of a layout is the most useful reason to show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from planner.layouts import (
    A2A_ON,
    DISPATCH_FLEX,
    SHARD_FULL,
    BoolArray,
    IntArray,
    LayoutBatch,
)
from planner.model.pipeline import split_arrays
from planner.space import comm_flags
from planner.space.memory_rules import MEMORY_RULES, has_layout
from planner.space.stack_rules import STACK_RULES
from planner.space.version_rules import split_exists, split_lacking, split_release_note
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob

__all__ = ["RULES", "Rule", "check_rules", "violations"]

_MAX_LISTED = 12


@dataclass(frozen=True, slots=True)
class _Context:
    """The inputs of every rule: scalars of the model/job and the layout columns."""

    model: ModelSpec
    cluster: ClusterSpec
    job: TrainingJob
    batch: LayoutBatch
    microbatches: IntArray
    """m = B / (b dp) where it divides exactly, else 0 (megatron-facts §3.2)."""

    @classmethod
    def build(
        cls, model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, batch: LayoutBatch
    ) -> _Context:
        per = np.maximum(batch.micro_batch_size * batch.dp, 1)
        b = job.global_batch_size
        m = np.where(b % per == 0, b // per, 0)
        return cls(model=model, cluster=cluster, job=job, batch=batch, microbatches=m)

    def col(self, name: str) -> IntArray:
        """A layout column with values below 1 raised to 1, safe as a divisor."""
        values: IntArray = np.maximum(getattr(self.batch, name), 1)
        return values

    def value(self, name: str, i: int) -> int:
        return int(getattr(self.batch, name)[i])


Check = Callable[[_Context], BoolArray]
Explain = Callable[[_Context, int], str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One Megatron-LM validation rule; ``check`` is True where a layout breaks it."""

    id: str
    """Short snake_case name, stable across releases (used in histograms and the API)."""
    summary: str
    """One sentence a person can act on."""
    source: str
    """Where the rule is documented (megatron-facts section and rule number)."""
    check: Check = field(repr=False, compare=False)
    explain: Explain = field(repr=False, compare=False)


def _listed(values: Iterable[int]) -> str:
    items = list(values)
    text = ", ".join(map(str, items[:_MAX_LISTED]))
    return text + (", ..." if len(items) > _MAX_LISTED else "") if items else "none"


def _valid(ctx: _Context, ok: Callable[[int], bool], upto: int | None = None) -> str:
    """The values 1..upto (default: the GPU count) that satisfy ``ok``, for messages."""
    limit = ctx.cluster.num_gpus if upto is None else upto
    return _listed(v for v in range(1, limit + 1) if ok(v))


def _false(ctx: _Context) -> BoolArray:
    return np.zeros(len(ctx.batch), dtype=np.bool_)


# --- checks and messages ----------------------------------------------------------------------
# Each pair below implements one rule of megatron-facts §2; the rule number is in RULES.


def _sizes_check(ctx: _Context) -> BoolArray:
    b = ctx.batch
    cols = (b.tp, b.pp, b.vpp, b.cp, b.ep, b.etp, b.dp, b.micro_batch_size)
    bad: BoolArray = np.logical_or.reduce([c < 1 for c in cols])
    return bad


def _sizes_explain(ctx: _Context, i: int) -> str:
    names = ("tp", "pp", "vpp", "cp", "ep", "etp", "dp", "micro_batch_size")
    bad = [f"{n}={ctx.value(n, i)}" for n in names if ctx.value(n, i) < 1]
    return f"{', '.join(bad)}: every parallel size and the micro batch must be >= 1"


def _world_check(ctx: _Context) -> BoolArray:
    # W = t p c d (megatron-facts §2.1 rules 1-2; §9 item 1)
    bad: BoolArray = ctx.batch.num_gpus != ctx.cluster.num_gpus
    return bad


def _world_explain(ctx: _Context, i: int) -> str:
    tp, pp, cp, dp = (ctx.value(n, i) for n in ("tp", "pp", "cp", "dp"))
    w = ctx.cluster.num_gpus
    head = f"tp*pp*cp*dp = {tp}*{pp}*{cp}*{dp} = {tp * pp * cp * dp} must equal num_gpus={w}"
    mp = max(tp * pp * cp, 1)
    if w % mp == 0:
        return f"{head}; with tp={tp}, pp={pp}, cp={cp} use dp={w // mp}"
    return f"{head}; tp*pp*cp = {mp} does not divide {w}, choose sizes whose product divides it"


def _fp8_check(ctx: _Context) -> BoolArray:
    if ctx.job.precision == "fp8" and ctx.cluster.gpu.peak_fp8_flop_per_s is None:
        return np.ones(len(ctx.batch), dtype=np.bool_)
    return _false(ctx)


def _fp8_explain(ctx: _Context, i: int) -> str:
    return (
        f"precision='fp8' needs fp8 tensor cores and {ctx.cluster.gpu.name} has none; "
        "use precision='bf16'"
    )


def _heads_check(ctx: _Context) -> BoolArray:
    bad: BoolArray = ctx.model.num_attention_heads % ctx.col("tp") != 0
    return bad


def _heads_explain(ctx: _Context, i: int) -> str:
    a = ctx.model.num_attention_heads
    return (
        f"tp={ctx.value('tp', i)} must divide num_attention_heads={a}; "
        f"valid tp: {_valid(ctx, lambda t: a % t == 0, min(a, ctx.cluster.num_gpus))}"
    )


def _groups_check(ctx: _Context) -> BoolArray:
    if ctx.model.num_query_groups is None:
        return _false(ctx)
    g, t = ctx.model.num_query_groups, ctx.col("tp")
    bad: BoolArray = (g % t != 0) & (t % g != 0)
    return bad


def _groups_explain(ctx: _Context, i: int) -> str:
    a, g = ctx.model.num_attention_heads, ctx.model.query_groups
    ok = _valid(ctx, lambda t: a % t == 0 and (g % t == 0 or t % g == 0), a)
    return (
        f"tp={ctx.value('tp', i)} and num_query_groups={g}: one must divide the other "
        f"(KV heads are split or replicated over tp); valid tp: {ok}"
    )


def _has_dense_mlp(model: ModelSpec) -> bool:
    return model.num_dense_layers > 0


def _ffn_check(ctx: _Context) -> BoolArray:
    if not _has_dense_mlp(ctx.model):
        return _false(ctx)
    bad: BoolArray = ctx.model.ffn_hidden_size % ctx.col("tp") != 0
    return bad


def _ffn_explain(ctx: _Context, i: int) -> str:
    f = ctx.model.ffn_hidden_size
    return (
        f"tp={ctx.value('tp', i)} must divide ffn_hidden_size={f}; "
        f"valid tp: {_valid(ctx, lambda t: f % t == 0)}"
    )


def _shared_check(ctx: _Context) -> BoolArray:
    fs = ctx.model.shared_expert_ffn_hidden_size
    if not ctx.model.is_moe or fs == 0:
        return _false(ctx)
    bad: BoolArray = fs % ctx.col("tp") != 0
    return bad


def _shared_explain(ctx: _Context, i: int) -> str:
    fs = ctx.model.shared_expert_ffn_hidden_size
    return (
        f"tp={ctx.value('tp', i)} must divide moe_shared_expert_intermediate_size={fs}; "
        f"valid tp: {_valid(ctx, lambda t: fs % t == 0)}"
    )


def _ep_dense_check(ctx: _Context) -> BoolArray:
    if ctx.model.is_moe:
        return _false(ctx)
    bad: BoolArray = ctx.batch.ep > 1
    return bad


def _ep_dense_explain(ctx: _Context, i: int) -> str:
    return (
        f"ep={ctx.value('ep', i)} needs a mixture-of-experts model and {ctx.model.name} is "
        "dense; use ep=1"
    )


def _experts_check(ctx: _Context) -> BoolArray:
    if not ctx.model.is_moe:
        return _false(ctx)
    bad: BoolArray = (ctx.model.num_experts or 1) % ctx.col("ep") != 0
    return bad


def _experts_explain(ctx: _Context, i: int) -> str:
    e = ctx.model.num_experts or 1
    return (
        f"ep={ctx.value('ep', i)} must divide num_experts={e}; "
        f"valid ep: {_valid(ctx, lambda v: e % v == 0, e)}"
    )


def _expert_ffn_check(ctx: _Context) -> BoolArray:
    if not ctx.model.is_moe:
        return _false(ctx)
    bad: BoolArray = ctx.model.expert_ffn_hidden_size % ctx.col("etp") != 0
    return bad


def _expert_ffn_explain(ctx: _Context, i: int) -> str:
    fe = ctx.model.expert_ffn_hidden_size
    return (
        f"etp={ctx.value('etp', i)} must divide the expert ffn size "
        f"moe_ffn_hidden_size={fe}; valid etp: {_valid(ctx, lambda t: fe % t == 0)}"
    )


def _grid_check(ctx: _Context) -> BoolArray:
    if not ctx.model.is_moe:
        return _false(ctx)
    # (t c d) mod (t_e e) = 0, i.e. W mod (t_e e p) = 0 (megatron-facts §2.1 rule 3)
    dense = ctx.col("tp") * ctx.col("cp") * ctx.col("dp")
    bad: BoolArray = dense % (ctx.col("etp") * ctx.col("ep")) != 0
    return bad


def _grid_explain(ctx: _Context, i: int) -> str:
    tp, cp, dp, ep, etp = (ctx.value(n, i) for n in ("tp", "cp", "dp", "ep", "etp"))
    dense, e = tp * cp * dp, ctx.model.num_experts or 1
    ok = _valid(ctx, lambda v: e % v == 0 and dense % (etp * v) == 0, e)
    return (
        f"tp*cp*dp = {tp}*{cp}*{dp} = {dense} must be divisible by etp*ep = {etp}*{ep} = "
        f"{etp * ep} (the expert grid folds tp, cp and dp); valid ep with etp={etp}: {ok}"
    )


def _bias_check(ctx: _Context) -> BoolArray:
    if not (ctx.model.is_moe and ctx.model.add_bias_linear):
        return _false(ctx)
    bad: BoolArray = ctx.batch.etp != 1
    return bad


def _bias_explain(ctx: _Context, i: int) -> str:
    return (
        f"{ctx.model.name} has linear biases, which Megatron's MoE layers support only with "
        f"etp=1 (got etp={ctx.value('etp', i)}); set etp=1"
    )


def _pp_check(ctx: _Context) -> BoolArray:
    # an even, account-for or uneven split exists in the job's release (rules 8-13; layout: 14)
    split = split_arrays(ctx.model.num_layers, ctx.batch, split_lacking(ctx.job)).method
    bad: BoolArray = (ctx.batch.vpp == 1) & (split < 0) & ~has_layout(ctx)
    return bad


def _pp_explain(ctx: _Context, i: int) -> str:
    n, pp, m, j = ctx.model.num_layers, ctx.value("pp", i), ctx.model, ctx.job
    ok = _valid(ctx, lambda p: split_exists(m, j, p, 1), min(n, ctx.cluster.num_gpus))
    return (
        f"pp={pp} cannot split num_layers={n}: Megatron needs pp to divide "
        f"{n}, or {n}+2 with the embedding and loss counted as layers, or an uneven first/last "
        f"stage with the middle stages even{split_release_note(m, j, pp, 1)}; valid pp: {ok}"
    )


def _vpp_pp_check(ctx: _Context) -> BoolArray:
    bad: BoolArray = (ctx.batch.vpp > 1) & (ctx.batch.pp <= 1)
    return bad


def _vpp_pp_explain(ctx: _Context, i: int) -> str:
    return f"vpp={ctx.value('vpp', i)} needs pp > 1; set vpp=1 or pp >= 2"


def _vpp_layers_check(ctx: _Context) -> BoolArray:
    split = split_arrays(ctx.model.num_layers, ctx.batch, split_lacking(ctx.job)).method
    bad: BoolArray = (ctx.batch.vpp > 1) & (ctx.batch.pp > 1) & (split < 0) & ~has_layout(ctx)
    return bad


def _vpp_layers_explain(ctx: _Context, i: int) -> str:
    m, j, pp, vpp = ctx.model, ctx.job, ctx.value("pp", i), ctx.value("vpp", i)
    ok = _valid(ctx, lambda v: split_exists(m, j, pp, v), max(m.num_layers // max(pp, 1), 1))
    return (
        f"vpp={vpp} cannot split num_layers={m.num_layers} over pp={pp} ranks: every virtual "
        f"stage needs a whole number of layers{split_release_note(m, j, pp, vpp)}; valid vpp: {ok}"
    )


def _batch_check(ctx: _Context) -> BoolArray:
    # B mod (b d) = 0 and m >= 1 (megatron-facts §2.6 rules 44-45)
    bad: BoolArray = ctx.microbatches < 1
    return bad


def _batch_explain(ctx: _Context, i: int) -> str:
    b, dp, gb = ctx.value("micro_batch_size", i), ctx.value("dp", i), ctx.job.global_batch_size
    ok = _valid(ctx, lambda v: gb % (v * max(dp, 1)) == 0, gb)
    return (
        f"global_batch_size={gb} must be a positive multiple of micro_batch_size*dp = "
        f"{b}*{dp} = {b * dp}; valid micro_batch_size with dp={dp}: {ok}"
    )


def _vpp_m_check(ctx: _Context) -> BoolArray:
    # interleaved 1F1B with group size p: m mod p = 0 and m >= p (megatron-facts rule 15)
    m, pp = ctx.microbatches, ctx.col("pp")
    bad: BoolArray = (ctx.batch.vpp > 1) & (m > 0) & ((m % pp != 0) | (m < pp))
    return bad


def _vpp_m_explain(ctx: _Context, i: int) -> str:
    pp = ctx.value("pp", i)
    return (
        f"the interleaved pipeline (vpp={ctx.value('vpp', i)}) needs the microbatch count "
        f"m = B/(b*dp) = {int(ctx.microbatches[i])} to be a multiple of pp={pp} and at least "
        f"{pp}; lower micro_batch_size or dp, or set vpp=1"
    )


def _cp_check(ctx: _Context) -> BoolArray:
    cp = ctx.col("cp")
    bad: BoolArray = (cp > 1) & (ctx.job.seq_length % (2 * cp) != 0)
    return bad


def _cp_explain(ctx: _Context, i: int) -> str:
    s, cp = ctx.job.seq_length, ctx.value("cp", i)
    return (
        f"seq_length={s} must be divisible by 2*cp = {2 * cp}; "
        f"valid cp: {_valid(ctx, lambda c: c == 1 or s % (2 * c) == 0)}"
    )


def _sp_tp_check(ctx: _Context) -> BoolArray:
    bad: BoolArray = ctx.batch.sequence_parallel & (ctx.batch.tp <= 1)
    return bad


def _sp_tp_explain(ctx: _Context, i: int) -> str:
    return "sequence_parallel needs tp > 1 (Megatron turns it off at tp=1); set it false"


def _sp_seq_check(ctx: _Context) -> BoolArray:
    # (s / c) mod t = 0 with sequence parallelism (megatron-facts rule 22)
    split = ctx.col("cp") * ctx.col("tp")
    bad: BoolArray = ctx.batch.sequence_parallel & (ctx.job.seq_length % split != 0)
    return bad


def _sp_seq_explain(ctx: _Context, i: int) -> str:
    s, cp, tp = ctx.job.seq_length, ctx.value("cp", i), ctx.value("tp", i)
    return (
        f"with sequence parallelism seq_length/cp = {s}/{cp} must be divisible by tp={tp}; "
        "choose a sequence length divisible by tp*cp or turn sequence_parallel off"
    )


def _moe_sp_check(ctx: _Context) -> BoolArray:
    if not ctx.model.is_moe:
        return _false(ctx)
    bad: BoolArray = (ctx.batch.tp > 1) & ~ctx.batch.sequence_parallel
    return bad


def _moe_sp_explain(ctx: _Context, i: int) -> str:
    return (
        f"a mixture-of-experts model with tp={ctx.value('tp', i)} needs sequence_parallel "
        "(Megatron's MoE layer raises without it); turn sequence_parallel on"
    )


def _fsdp(ctx: _Context) -> BoolArray:
    on: BoolArray = ctx.batch.optimizer_sharding == SHARD_FULL
    return on


def _fsdp_pp_check(ctx: _Context) -> BoolArray:
    bad: BoolArray = _fsdp(ctx) & (ctx.batch.pp > 1)
    return bad


def _fsdp_pp_explain(ctx: _Context, i: int) -> str:
    return (
        f"optimizer_sharding='full' (Torch-FSDP2) needs pp=1, got pp={ctx.value('pp', i)}; "
        "use optimizer_sharding='optimizer' or pp=1"
    )


def _fsdp_ep_check(ctx: _Context) -> BoolArray:
    bad: BoolArray = _fsdp(ctx) & (ctx.batch.ep > 1)
    return bad


def _fsdp_ep_explain(ctx: _Context, i: int) -> str:
    return (
        f"optimizer_sharding='full' (Torch-FSDP2) needs ep=1, got ep={ctx.value('ep', i)}; "
        "use optimizer_sharding='optimizer' or ep=1"
    )


def _fsdp_tied_check(ctx: _Context) -> BoolArray:
    if ctx.model.untie_embeddings_and_output_weights:
        return _false(ctx)
    return _fsdp(ctx)


def _fsdp_tied_explain(ctx: _Context, i: int) -> str:
    return (
        f"optimizer_sharding='full' (Torch-FSDP2) needs untied embeddings and {ctx.model.name} "
        "ties them; use optimizer_sharding='optimizer'"
    )


def _positions_check(ctx: _Context) -> BoolArray:
    limit = ctx.model.max_position_embeddings
    learned = ctx.model.position_embedding_type == "learned_absolute"
    if learned and limit is not None and ctx.job.seq_length > limit:
        return np.ones(len(ctx.batch), dtype=np.bool_)
    return _false(ctx)


def _positions_explain(ctx: _Context, i: int) -> str:
    limit = ctx.model.max_position_embeddings
    return (
        f"seq_length={ctx.job.seq_length} exceeds the learned position table "
        f"max_position_embeddings={limit}; use seq_length <= {limit}"
    )


def _a2a_check(ctx: _Context) -> BoolArray:
    requested = ctx.batch.moe_a2a_overlap == A2A_ON
    blocked: BoolArray = requested & ~comm_flags.allowed_for(ctx)
    return blocked


def _a2a_explain(ctx: _Context, i: int) -> str:
    why = comm_flags.reasons_for(ctx, i)
    return f"moe_a2a_overlap=true cannot be used here: {'; '.join(why)}; or leave it unset"


def _flex_check(ctx: _Context) -> BoolArray:
    requested = ctx.batch.moe_dispatcher == DISPATCH_FLEX
    blocked: BoolArray = requested & ~comm_flags.flex_allowed(ctx.model, ctx.cluster, ctx.batch)
    return blocked


def _flex_explain(ctx: _Context, i: int) -> str:
    gpu = ctx.cluster.gpu
    return (
        f"moe_dispatcher='flex' (DeepEP) needs an MoE model with ep > 1 on an NVIDIA Hopper or "
        f"Blackwell GPU; here ep={ctx.value('ep', i)} on {gpu.name} ({gpu.architecture}); use "
        "'alltoall' or leave it unset"
    )


def _rule(rid: str, summary: str, source: str, check: Check, explain: Explain) -> Rule:
    return Rule(id=rid, summary=summary, source=source, check=check, explain=explain)


_S = "megatron-facts §2."
RULES: tuple[Rule, ...] = (
    _rule("sizes_positive", "every parallel size and micro_batch_size must be >= 1",
          _S + "1 rule 2", _sizes_check, _sizes_explain),
    _rule("world_size", "tp*pp*cp*dp must equal the number of GPUs",
          _S + "1 rules 1-2", _world_check, _world_explain),
    _rule("fp8_needs_gpu_support", "fp8 training needs a GPU with fp8 tensor cores",
          "megatron-facts §1.8", _fp8_check, _fp8_explain),
    _rule("heads_divisible_by_tp", "tp must divide num_attention_heads",
          _S + "3 rule 17", _heads_check, _heads_explain),
    _rule("query_groups_vs_tp", "num_query_groups must be a multiple or a divisor of tp",
          _S + "3 rule 18", _groups_check, _groups_explain),
    _rule("ffn_divisible_by_tp", "tp must divide ffn_hidden_size",
          _S + "3 rule 20", _ffn_check, _ffn_explain),
    _rule("shared_expert_ffn_divisible_by_tp",
          "tp must divide moe_shared_expert_intermediate_size",
          _S + "3 rule 20", _shared_check, _shared_explain),
    _rule("ep_needs_experts", "ep > 1 needs a mixture-of-experts model",
          _S + "5 rule 31", _ep_dense_check, _ep_dense_explain),
    _rule("experts_divisible_by_ep", "ep must divide num_experts",
          _S + "5 rule 32", _experts_check, _experts_explain),
    _rule("expert_ffn_divisible_by_etp", "etp must divide the expert ffn size",
          _S + "3 rule 20", _expert_ffn_check, _expert_ffn_explain),
    _rule("expert_grid_divisible", "etp*ep must divide tp*cp*dp (the expert grid)",
          _S + "1 rule 3", _grid_check, _grid_explain),
    _rule("moe_bias_needs_etp1", "a MoE model with linear biases needs etp=1",
          _S + "5 rule 34", _bias_check, _bias_explain),
    _rule("layers_split_by_pp", "pp must split num_layers into pipeline stages",
          _S + "2 rule 8", _pp_check, _pp_explain),
    _rule("vpp_needs_pp", "vpp > 1 needs pp > 1",
          _S + "2 rule 11", _vpp_pp_check, _vpp_pp_explain),
    _rule("layers_split_by_pp_vpp", "vpp must split each pipeline stage's layers evenly",
          _S + "2 rule 10", _vpp_layers_check, _vpp_layers_explain),
    _rule("global_batch_divisible",
          "global_batch_size must be a positive multiple of micro_batch_size*dp",
          _S + "6 rules 44-45", _batch_check, _batch_explain),
    _rule("vpp_microbatches",
          "with vpp > 1 the microbatch count must be a multiple of pp and at least pp",
          _S + "2 rule 15", _vpp_m_check, _vpp_m_explain),
    _rule("seq_divisible_by_2cp", "seq_length must be divisible by 2*cp",
          _S + "3 rule 21", _cp_check, _cp_explain),
    _rule("sp_needs_tp", "sequence_parallel needs tp > 1",
          _S + "4 rule 28", _sp_tp_check, _sp_tp_explain),
    _rule("sp_seq_divisible_by_tp", "with sequence parallelism seq_length/cp must divide by tp",
          _S + "3 rule 22", _sp_seq_check, _sp_seq_explain),
    _rule("moe_tp_needs_sp", "a MoE model with tp > 1 needs sequence_parallel",
          _S + "5 rule 33", _moe_sp_check, _moe_sp_explain),
    _rule("fsdp_no_pp", "optimizer_sharding='full' (Torch-FSDP2) needs pp=1",
          _S + "8 rule 58", _fsdp_pp_check, _fsdp_pp_explain),
    _rule("fsdp_no_ep", "optimizer_sharding='full' (Torch-FSDP2) needs ep=1",
          _S + "8 rule 58", _fsdp_ep_check, _fsdp_ep_explain),
    _rule("fsdp_needs_untied_embeddings",
          "optimizer_sharding='full' (Torch-FSDP2) needs untied embeddings",
          _S + "8 rule 58", _fsdp_tied_check, _fsdp_tied_explain),
    _rule("seq_within_learned_positions",
          "seq_length must not exceed a learned max_position_embeddings",
          _S + "3 rule 23", _positions_check, _positions_explain),
    _rule("moe_a2a_overlap_allowed",
          "moe_a2a_overlap needs ep > 1, no full recompute or 'moe' recompute module, MTP depth "
          "<= 1, vpp > 1 with pp > 1 and (planner policy, before Blackwell) no --tp-comm-overlap",
          _S + "5 rule 40, §2.2 rule 16; planner.space.comm_flags", _a2a_check, _a2a_explain),
    _rule("moe_flex_dispatcher_supported",
          "moe_dispatcher='flex' (DeepEP) needs ep > 1 on NVIDIA Hopper or Blackwell",
          "megatron-facts §1.5; performance-facts §5.1", _flex_check, _flex_explain),
)  # fmt: skip
RULES = (*RULES, *(_rule(*s) for s in (*MEMORY_RULES, *STACK_RULES)))  # issues 13, 12


def check_rules(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, batch: LayoutBatch
) -> BoolArray:
    """Boolean matrix of shape (len(batch), len(RULES)); True where a layout breaks a rule."""
    ctx = _Context.build(model, cluster, job, batch)
    out = np.zeros((len(batch), len(RULES)), dtype=np.bool_)
    for j, rule in enumerate(RULES):
        out[:, j] = rule.check(ctx)
    return out


def violations(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout
) -> list[str]:
    """Messages for every rule the layout breaks, naming the values and a fix."""
    batch = LayoutBatch.from_layouts([layout])
    ctx = _Context.build(model, cluster, job, batch)
    row = check_rules(model, cluster, job, batch)[0]
    return [RULES[j].explain(ctx, 0) for j in np.flatnonzero(row)]
