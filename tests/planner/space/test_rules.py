"""Megatron's validation rules: each fires on a layout that breaks it and not on a fixed one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from planner.layouts import LayoutBatch
from planner.space.rules import RULES, check_rules, violations
from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import H100
from tests.support.vectorised import assert_calls_do_not_grow

A100 = GPUSpec(
    name="a100-sxm-80gb",
    hbm_bytes=80 * 2**30,
    hbm_bandwidth_bytes_per_s=2.0e12,
    peak_bf16_flop_per_s=312e12,
    peak_fp8_flop_per_s=None,
    intra_node_bandwidth_bytes_per_s=300e9,
    architecture="ampere",
)


def cluster(n: int, gpu: GPUSpec = H100) -> ClusterSpec:
    return ClusterSpec(name=f"c{n}", gpu=gpu, num_gpus=n)


def dense(**kw: Any) -> ModelSpec:
    """Llama-3-8B-like (megatron-facts §8 cases A-C), overridable."""
    base: dict[str, Any] = dict(
        name="dense", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
        num_attention_heads=32, num_query_groups=8, vocab_size=128256,
    )  # fmt: skip
    return ModelSpec(**{**base, **kw})


def moe(**kw: Any) -> ModelSpec:
    """Mixtral-8x7B-like (megatron-facts §8 case D), overridable."""
    base: dict[str, Any] = dict(
        name="moe", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
        num_attention_heads=32, num_query_groups=8, vocab_size=32000, num_experts=8,
        moe_router_topk=2,
    )  # fmt: skip
    return ModelSpec(**{**base, **kw})


JOB = TrainingJob(seq_length=4096, global_batch_size=128)


def fired(model: ModelSpec, c: ClusterSpec, job: TrainingJob, layout: Layout) -> set[str]:
    row = check_rules(model, c, job, LayoutBatch.from_layouts([layout]))[0]
    return {RULES[j].id for j in np.flatnonzero(row)}


# (rule id, model, cluster, job, layout that breaks it, fixed layout that is fully valid)
CASES: list[tuple[str, ModelSpec, ClusterSpec, TrainingJob, Layout, Layout]] = [
    ("world_size", dense(), cluster(16), JOB, Layout(tp=2, pp=2, dp=2), Layout(tp=2, pp=2, dp=4)),
    ("fp8_needs_gpu_support", dense(), cluster(8, A100),
     TrainingJob(seq_length=4096, global_batch_size=128, precision="fp8"),
     Layout(dp=8), Layout(dp=8)),  # the fixed one below uses H100 (see test_fp8_on_h100)
    ("heads_divisible_by_tp", dense(num_query_groups=None, ffn_hidden_size=11008), cluster(24),
     TrainingJob(seq_length=4096, global_batch_size=96), Layout(tp=3, dp=8),
     Layout(tp=4, dp=6)),
    ("ffn_divisible_by_tp", dense(ffn_hidden_size=11004), cluster(8), JOB,
     Layout(tp=8), Layout(tp=4, dp=2)),
    ("shared_expert_ffn_divisible_by_tp", moe(moe_shared_expert_intermediate_size=2052),
     cluster(8), JOB, Layout(tp=8, etp=1, ep=8), Layout(tp=4, etp=1, ep=8, dp=2)),
    ("ep_needs_experts", dense(), cluster(8), JOB, Layout(ep=2, dp=8), Layout(dp=8)),
    ("experts_divisible_by_ep", moe(), cluster(24),
     TrainingJob(seq_length=4096, global_batch_size=96), Layout(tp=2, etp=1, ep=3, dp=12),
     Layout(tp=2, etp=1, ep=4, dp=12)),
    ("expert_ffn_divisible_by_etp", moe(moe_ffn_hidden_size=1412), cluster(8), JOB,
     Layout(tp=8, etp=8), Layout(tp=8, etp=1, ep=8)),
    ("expert_grid_divisible", moe(), cluster(8), JOB, Layout(tp=2, etp=2, ep=8, dp=4),
     Layout(cp=2, etp=1, ep=8, dp=4)),  # [run]: c=2, e=8, t_e=1 on 8 GPUs passes
    ("moe_bias_needs_etp1", moe(add_bias_linear=True), cluster(8), JOB,
     Layout(tp=2, etp=2, ep=4, dp=4), Layout(tp=2, etp=1, ep=4, dp=4)),
    ("layers_split_by_pp", dense(num_layers=30), cluster(64), JOB, Layout(pp=32, dp=2),
     Layout(pp=4, dp=16)),  # 30 layers: no split over 32 ranks; 4 ranks via embedding+loss
    ("vpp_needs_pp", dense(), cluster(8), JOB, Layout(vpp=2, dp=8), Layout(pp=2, vpp=2, dp=4)),
    ("layers_split_by_pp_vpp", dense(num_layers=30), cluster(8), JOB,
     Layout(pp=4, vpp=7, dp=2), Layout(pp=4, vpp=2, dp=2)),
    ("global_batch_divisible", dense(), cluster(8),  # [run]: B=6 with d=4 fails
     TrainingJob(seq_length=4096, global_batch_size=6), Layout(tp=2, dp=4),
     Layout(tp=4, dp=2)),
    ("vpp_microbatches", dense(), cluster(8),  # m = 2/(1*2) = 1 < p
     TrainingJob(seq_length=4096, global_batch_size=2), Layout(pp=4, vpp=2, dp=2),
     Layout(pp=2, dp=2, tp=2)),
    ("vpp_microbatches", dense(), cluster(8),  # m = 12/2 = 6, not a multiple of p = 4
     TrainingJob(seq_length=4096, global_batch_size=12), Layout(pp=4, vpp=2, dp=2),
     Layout(pp=2, vpp=2, tp=2, dp=2)),
    ("seq_divisible_by_2cp", dense(), cluster(8),  # [run]: s=4100 with c=4 fails
     TrainingJob(seq_length=4100, global_batch_size=128), Layout(cp=4, dp=2),
     Layout(cp=2, dp=4)),
    ("seq_divisible_by_2cp", dense(), cluster(8),  # [run]: s=4098 with c=2 fails
     TrainingJob(seq_length=4098, global_batch_size=128), Layout(cp=2, dp=4),
     Layout(tp=2, dp=4)),
    ("sp_needs_tp", dense(), cluster(8), JOB, Layout(dp=8, sequence_parallel=True),
     Layout(dp=8)),
    ("sp_seq_divisible_by_tp", dense(), cluster(16),  # (8200/2) mod 8 != 0
     TrainingJob(seq_length=8200, global_batch_size=128), Layout(tp=8, cp=2),
     Layout(tp=4, cp=2, dp=2)),
    ("moe_a2a_overlap_allowed", moe(), cluster(16), JOB,  # pp > 1 needs vpp (rule 16)
     Layout(pp=2, ep=8, dp=8, moe_a2a_overlap=True),
     Layout(pp=2, vpp=2, ep=8, dp=8, moe_a2a_overlap=True)),
    ("moe_flex_dispatcher_supported", moe(), cluster(16), JOB,  # DeepEP needs ep > 1
     Layout(dp=16, moe_dispatcher="flex"), Layout(ep=8, dp=16, moe_dispatcher="flex")),
    ("moe_tp_needs_sp", moe(), cluster(8), JOB,  # even with e=1 (rule 33, runtime)
     Layout(tp=2, dp=4, sequence_parallel=False), Layout(tp=2, dp=4)),
    ("fsdp_no_pp", dense(), cluster(8), JOB, Layout(pp=2, dp=4, optimizer_sharding="full"),
     Layout(dp=8, optimizer_sharding="full")),
    ("fsdp_no_ep", moe(), cluster(8), JOB,
     Layout(ep=8, etp=1, dp=8, optimizer_sharding="full"),
     Layout(ep=1, dp=8, optimizer_sharding="full")),
    ("fsdp_needs_untied_embeddings", dense(untie_embeddings_and_output_weights=False),
     cluster(8), JOB, Layout(dp=8, optimizer_sharding="full"), Layout(dp=8)),
    ("seq_within_learned_positions",
     dense(position_embedding_type="learned_absolute", max_position_embeddings=2048),
     cluster(8), JOB, Layout(dp=8), Layout(dp=8)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_fires_on_breaking_layout(case: tuple[Any, ...]) -> None:
    rule_id, model, c, job, bad, _ = case
    assert rule_id in fired(model, c, job, bad)


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c[0] not in ("fp8_needs_gpu_support", "seq_within_learned_positions")],
    ids=lambda c: c[0],
)
def test_fixed_layout_breaks_no_rule(case: tuple[Any, ...]) -> None:
    _, model, c, job, _, good = case
    assert fired(model, c, job, good) == set()


def test_every_rule_has_a_breaking_case() -> None:
    # query_groups_vs_tp and sizes_positive have their own tests below
    from tests.planner.space.test_memory_rules import MEMORY_RULE_IDS  # memory settings

    covered = {c[0] for c in CASES} | {"sizes_positive", "query_groups_vs_tp"} | MEMORY_RULE_IDS
    covered |= {"cp_a2a_heads_divisible", "cp_a2a_p2p_hierarchical"}  # test_cp_comm_type.py
    covered |= {"cp_window_needs_all_gather"}  # test_attention_window_cp.py
    covered |= {"moe_grouped_gemm_kernel_supported"}  # test_stack_rules.py
    covered |= {"fp8_recipe_supported_on_gpu"}  # tests/planner/test_fp8_recipes.py
    covered |= {"stack_version_has_setting"}  # test_version_rules.py
    assert covered == {r.id for r in RULES}


def test_fp8_on_h100_is_allowed() -> None:
    job = TrainingJob(seq_length=4096, global_batch_size=128, precision="fp8")
    assert fired(dense(), cluster(8), job, Layout(dp=8)) == set()


def test_learned_positions_within_table_and_rope_beyond_it_pass() -> None:
    learned = dense(position_embedding_type="learned_absolute", max_position_embeddings=4096)
    rope = dense(max_position_embeddings=2048)  # rope stretches; we emit max(2048, s)
    assert fired(learned, cluster(8), JOB, Layout(dp=8)) == set()
    assert fired(rope, cluster(8), JOB, Layout(dp=8)) == set()


@pytest.mark.parametrize(("groups", "broken"), [(3, True), (12, True), (4, False), (16, False)])
def test_query_groups_multiple_or_divisor_of_tp(groups: int, broken: bool) -> None:
    # [run] megatron-facts rule 18: t=8 with g=4 and g=16 passes, g=3 and g=12 fail
    model = dense(hidden_size=6144, num_attention_heads=48, num_query_groups=groups,
                  ffn_hidden_size=16384)  # fmt: skip
    ids = fired(model, cluster(8), JOB, Layout(tp=8))
    assert ("query_groups_vs_tp" in ids) is broken
    assert ids <= {"query_groups_vs_tp"}


def test_ffn_rule_ignores_models_without_dense_layers() -> None:
    # every layer is MoE, so ffn_hidden_size is never split (Qwen3-MoE keeps an unused value)
    model = moe(ffn_hidden_size=6150, moe_ffn_hidden_size=768)
    assert fired(model, cluster(8), JOB, Layout(tp=4, etp=1, ep=8, dp=2)) == set()


def test_zero_sizes_break_sizes_positive() -> None:
    batch = LayoutBatch.from_columns(tp=[1, 1], dp=[8, 0])
    violated = check_rules(dense(), cluster(8), JOB, batch)
    j = [r.id for r in RULES].index("sizes_positive")
    assert violated[:, j].tolist() == [False, True]


def test_rule_ids_are_unique_and_cite_megatron_facts() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert all(r.source.startswith("megatron-facts §") for r in RULES)
    assert all(r.id.isidentifier() and r.id == r.id.lower() for r in RULES)


def test_world_size_comes_before_head_split() -> None:
    ids = [r.id for r in RULES]
    assert ids.index("world_size") < ids.index("heads_divisible_by_tp")
    assert ids.index("global_batch_divisible") < ids.index("vpp_microbatches")


def test_violation_message_names_values_and_fix() -> None:
    model = dense(hidden_size=8192, num_attention_heads=64, num_query_groups=None,
                  ffn_hidden_size=28672)  # fmt: skip
    msgs = violations(model, cluster(24), JOB, Layout(tp=3, dp=8))
    assert "tp=3 must divide num_attention_heads=64; valid tp: 1, 2, 4, 8, 16" in msgs[0]


def test_violation_message_for_world_size_suggests_dp() -> None:
    msgs = violations(dense(), cluster(16), JOB, Layout(tp=2, pp=2, dp=2))
    assert msgs == [
        "tp*pp*cp*dp = 2*2*1*2 = 8 must equal num_gpus=16; with tp=2, pp=2, cp=1 use dp=4"
    ]


def test_valid_layout_has_no_messages() -> None:
    assert violations(dense(), cluster(16), JOB, Layout(tp=2, pp=2, dp=4)) == []


def test_message_count_matches_violated_rules() -> None:
    lay = Layout(tp=3, pp=5, vpp=2, cp=3, ep=2, dp=1, micro_batch_size=3)
    c, job = cluster(8), TrainingJob(seq_length=4100, global_batch_size=100)
    assert len(violations(dense(), c, job, lay)) == len(fired(dense(), c, job, lay)) >= 6


# --- the vectorised check against an independent scalar reference ------------------------------


def _megatron_can_split(layers: int, pp: int, vpp: int) -> bool:
    """Independent reading of megatron-facts rules 8-13: even, embedding+loss, uneven ends."""
    if vpp > 1 and pp < 2:
        return False
    if layers % (pp * vpp) == 0:
        return True
    if pp == 1:
        return False
    if (layers + 2) % (pp * vpp) == 0 and (layers + 2) // (pp * vpp) >= 2:
        return True
    for first in range(vpp, layers + 1, vpp):
        for last in range(vpp, layers - first + 1, vpp):
            mid, ranks = layers - first - last, pp - 2
            if ranks == 0 and mid == 0:
                return True
            if ranks > 0 and mid > 0 and mid % ranks == 0 and (mid // ranks) % vpp == 0:
                return True
    return False


def reference(model: ModelSpec, c: ClusterSpec, job: TrainingJob, x: Layout) -> set[str]:
    """Megatron-facts §2 written out per layout in plain Python."""
    out: set[str] = set()
    tp, pp, vpp, cp, ep, etp, dp, b = (
        x.tp,
        x.pp,
        x.vpp,
        x.cp,
        x.ep,
        x.expert_tp,
        x.dp,
        (x.micro_batch_size),
    )
    sp, is_moe = x.sp, model.is_moe
    s, gb = job.seq_length, job.global_batch_size
    if tp * pp * cp * dp != c.num_gpus:
        out.add("world_size")
    if model.num_attention_heads % tp:
        out.add("heads_divisible_by_tp")
    g = model.num_query_groups
    if g is not None and g % tp and tp % g:
        out.add("query_groups_vs_tp")
    if model.num_dense_layers and model.ffn_hidden_size % tp:
        out.add("ffn_divisible_by_tp")
    if is_moe and model.shared_expert_ffn_hidden_size % tp:
        out.add("shared_expert_ffn_divisible_by_tp")
    if not is_moe and ep > 1:
        out.add("ep_needs_experts")
    if is_moe and (model.num_experts or 0) % ep:
        out.add("experts_divisible_by_ep")
    if is_moe and model.expert_ffn_hidden_size % etp:
        out.add("expert_ffn_divisible_by_etp")
    if is_moe and (tp * cp * dp) % (etp * ep):
        out.add("expert_grid_divisible")
    if is_moe and model.add_bias_linear and etp != 1:
        out.add("moe_bias_needs_etp1")
    if vpp == 1 and not _megatron_can_split(model.num_layers, pp, 1):
        out.add("layers_split_by_pp")
    if vpp > 1 and pp == 1:
        out.add("vpp_needs_pp")
    if vpp > 1 and pp > 1 and not _megatron_can_split(model.num_layers, pp, vpp):
        out.add("layers_split_by_pp_vpp")
    m = gb // (b * dp) if gb % (b * dp) == 0 else 0
    if m == 0:
        out.add("global_batch_divisible")
    if vpp > 1 and m and (m % pp or m < pp):
        out.add("vpp_microbatches")
    if cp > 1 and s % (2 * cp):
        out.add("seq_divisible_by_2cp")
    if sp and tp == 1:
        out.add("sp_needs_tp")
    if sp and (s % cp or (s // cp) % tp):
        out.add("sp_seq_divisible_by_tp")
    if is_moe and tp > 1 and not sp:
        out.add("moe_tp_needs_sp")
    full = x.optimizer_sharding == "full"
    if full and pp > 1:
        out.add("fsdp_no_pp")
    if full and ep > 1:
        out.add("fsdp_no_ep")
    if full and not model.untie_embeddings_and_output_weights:
        out.add("fsdp_needs_untied_embeddings")
    tp_overlap = c.gpu.architecture == "hopper" and sp and 1 < tp <= c.gpus_per_node
    if x.moe_a2a_overlap and (
        not is_moe
        or ep < 2
        or x.recompute == "full"
        or model.mtp_num_layers > 1
        or (pp > 1 and vpp < 2)
        or tp_overlap
    ):
        out.add("moe_a2a_overlap_allowed")
    deepep = c.gpu.vendor == "nvidia" and c.gpu.architecture in ("hopper", "blackwell")
    if x.moe_dispatcher == "flex" and not (is_moe and ep > 1 and deepep):
        out.add("moe_flex_dispatcher_supported")
    return out


def random_layouts(rng: np.random.Generator, n: int) -> list[Layout]:
    pick = rng.choice
    return [
        Layout(
            tp=int(pick([1, 2, 3, 4, 8])),
            pp=int(pick([1, 2, 3, 4])),
            vpp=int(pick([1, 2, 3])),
            cp=int(pick([1, 2, 4])),
            ep=int(pick([1, 2, 3, 4, 8])),
            etp=int(pick([1, 2, 4, 8])),
            dp=int(pick([1, 2, 3, 4, 8])),
            micro_batch_size=int(pick([1, 2, 3, 4])),
            recompute=str(pick(["none", "selective", "full"])),
            sequence_parallel=bool(pick([True, False])),
            optimizer_sharding=str(pick(["none", "optimizer", "full"])),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    "model",
    [dense(), moe(), moe(add_bias_linear=True, moe_shared_expert_intermediate_size=2052),
     dense(num_layers=30, untie_embeddings_and_output_weights=False)],
    ids=["dense", "moe", "moe-bias-shared", "dense-tied"],
)  # fmt: skip
def test_vectorised_check_matches_scalar_reference(model: ModelSpec) -> None:
    rng = np.random.default_rng(7)
    layouts = random_layouts(rng, 400)
    c, job = cluster(16), TrainingJob(seq_length=4104, global_batch_size=48)
    violated = check_rules(model, c, job, LayoutBatch.from_layouts(layouts))
    for i, lay in enumerate(layouts):
        got = {RULES[j].id for j in np.flatnonzero(violated[i])}
        assert got == reference(model, c, job, lay), lay


def test_check_rules_shape_and_dtype() -> None:
    batch = LayoutBatch.from_columns(tp=[1, 2, 4], dp=[8, 4, 2])
    out = check_rules(dense(), cluster(8), JOB, batch)
    assert out.shape == (3, len(RULES)) and out.dtype == np.bool_
    assert not out.any()


def test_check_rules_on_100k_layouts_is_one_vectorised_pass() -> None:
    rng = np.random.default_rng(0)
    n = 100_000
    batch = LayoutBatch.from_columns(
        tp=rng.choice([1, 2, 4, 8], n), pp=rng.choice([1, 2, 4], n), vpp=rng.choice([1, 2], n),
        cp=rng.choice([1, 2], n), ep=rng.choice([1, 2, 4, 8], n), etp=rng.choice([1, 2], n),
        dp=rng.choice([1, 2, 4, 8, 16], n), micro_batch_size=rng.choice([1, 2, 4], n),
        recompute=rng.choice(3, n), optimizer_sharding=rng.choice(3, n),
    )  # fmt: skip
    model, c = moe(moe_shared_expert_intermediate_size=4096), cluster(64)
    out = check_rules(model, c, JOB, batch)
    assert out.shape == (n, len(RULES))
    assert_calls_do_not_grow(
        lambda: check_rules(model, c, JOB, batch.take(np.arange(1_000))),
        lambda: check_rules(model, c, JOB, batch),
    )
