"""The layout space: enumeration, constraints, and the rejection histogram."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from planner.layouts import A2A_AUTO, A2A_OFF, LayoutBatch
from planner.space.enumeration import SearchConstraints, enumerate_layouts, rejection_histogram
from planner.space.rules import RULES, check_rules
from planner.specs import ClusterSpec, Layout, ModelSpec, SpecError, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B
from tests.support.vectorised import assert_calls_do_not_grow

LLAMA405B = ModelSpec(
    name="llama3.1-405b", num_layers=126, hidden_size=16384, ffn_hidden_size=53248,
    num_attention_heads=128, num_query_groups=8, vocab_size=128256,
)  # fmt: skip
JOB = TrainingJob(seq_length=8192, global_batch_size=128)


def cluster(n: int) -> ClusterSpec:
    return ClusterSpec(name=f"c{n}", gpu=H100, num_gpus=n)


def rows(batch: LayoutBatch) -> set[tuple[Any, ...]]:
    cols = (batch.tp, batch.pp, batch.vpp, batch.cp, batch.ep, batch.etp, batch.dp,
            batch.micro_batch_size, batch.recompute, batch.sequence_parallel,
            batch.optimizer_sharding, batch.moe_a2a_overlap, batch.moe_dispatcher)  # fmt: skip
    return {tuple(int(c[i]) for c in cols) for i in range(len(batch))}


def test_every_row_uses_all_gpus() -> None:
    batch = enumerate_layouts(LLAMA_8B, cluster(64), JOB)
    assert len(batch) > 0
    assert (batch.tp * batch.pp * batch.cp * batch.dp == 64).all()


def test_no_duplicate_rows() -> None:
    batch = enumerate_layouts(MIXTRAL_8X7B, cluster(32), JOB)
    assert len(rows(batch)) == len(batch)


def test_moe_search_tries_the_a2a_overlap_off_where_auto_would_turn_it_on() -> None:
    batch = enumerate_layouts(MIXTRAL_8X7B, cluster(32), JOB)
    off = batch.moe_a2a_overlap == A2A_OFF
    assert off.any() and (batch.ep[off] > 1).all()
    assert (enumerate_layouts(LLAMA_8B, cluster(32), JOB).moe_a2a_overlap == A2A_AUTO).all()
    fixed = enumerate_layouts(
        MIXTRAL_8X7B, cluster(32), JOB, SearchConstraints(moe_a2a_overlap=False)
    )
    assert (fixed.moe_a2a_overlap == A2A_OFF).all()


def test_dense_model_has_no_expert_parallelism() -> None:
    batch = enumerate_layouts(LLAMA_8B, cluster(32), JOB)
    assert (batch.ep == 1).all() and (batch.etp == batch.tp).all()


def test_moe_model_etp_is_one_or_tp_and_ep_divides_experts() -> None:
    batch = enumerate_layouts(MIXTRAL_8X7B, cluster(32), JOB)
    assert ((batch.etp == 1) | (batch.etp == batch.tp)).all()
    assert (8 % batch.ep == 0).all()
    assert set(batch.ep.tolist()) == {1, 2, 4, 8}


def test_vpp_only_with_pp_and_divides_layers_per_stage() -> None:
    batch = enumerate_layouts(LLAMA_8B, cluster(64), JOB)
    assert (batch.pp[batch.vpp > 1] > 1).all()
    assert ((32 // batch.pp) % batch.vpp == 0).all()
    assert (batch.vpp > 1).any()


def test_sequence_parallel_exactly_when_tp_above_one_by_default() -> None:
    batch = enumerate_layouts(LLAMA_8B, cluster(16), JOB)
    assert (batch.sequence_parallel == (batch.tp > 1)).all()


def test_default_tp_stays_inside_a_node() -> None:
    batch = enumerate_layouts(LLAMA_8B, cluster(64), JOB)
    assert set(batch.tp.tolist()) == {1, 2, 4, 8}


def test_fixed_axes_are_respected() -> None:
    c = SearchConstraints(tp=2, pp=(1, 2), micro_batch_size=(1, 2), recompute=("full",),
                          optimizer_sharding=("optimizer",))  # fmt: skip
    batch = enumerate_layouts(LLAMA_8B, cluster(16), JOB, c)
    assert set(batch.tp.tolist()) == {2}
    assert set(batch.pp.tolist()) == {1, 2}
    assert set(batch.micro_batch_size.tolist()) == {1, 2}
    assert set(batch.recompute.tolist()) == {2}
    assert set(batch.optimizer_sharding.tolist()) == {1}


def test_max_limits_are_respected() -> None:
    c = SearchConstraints(max_tp=4, max_pp=2, max_cp=2, max_ep=2, max_micro_batch_size=4,
                          max_vpp=2)  # fmt: skip
    batch = enumerate_layouts(MIXTRAL_8X7B, cluster(64), JOB, c)
    assert batch.tp.max() == 4 and batch.pp.max() == 2 and batch.cp.max() == 2
    assert batch.ep.max() == 2 and batch.micro_batch_size.max() == 4 and batch.vpp.max() == 2


def test_sequence_parallel_choices_never_give_sp_to_tp1() -> None:
    c = SearchConstraints(sequence_parallel=(True, False))
    batch = enumerate_layouts(LLAMA_8B, cluster(8), JOB, c)
    assert not batch.sequence_parallel[batch.tp == 1].any()
    tp2 = batch.sequence_parallel[batch.tp == 2]
    assert tp2.any() and not tp2.all()


def _can_split(layers: int, pp: int, vpp: int) -> bool:
    """Megatron's even / embedding+loss / uneven first-last splits (megatron-facts rules 8-13)."""
    if vpp > 1 and pp < 2:
        return False
    if layers % (pp * vpp) == 0:
        return True
    if pp > 1 and (layers + 2) % (pp * vpp) == 0 and (layers + 2) // (pp * vpp) >= 2:
        return True
    return pp > 1 and any(
        (pp == 2 and layers - f - last == 0)
        or (
            pp > 2
            and (mid := layers - f - last) > 0
            and mid % (pp - 2) == 0
            and (mid // (pp - 2)) % vpp == 0
        )
        for f in range(vpp, layers + 1, vpp)
        for last in range(vpp, layers - f + 1, vpp)
    )


def test_matches_brute_force_product() -> None:
    """The numpy product equals itertools.product over the documented candidates."""
    model = ModelSpec(name="m", num_layers=12, hidden_size=1024, ffn_hidden_size=4096,
                      num_attention_heads=16, num_query_groups=4, vocab_size=32000,
                      num_experts=4)  # fmt: skip
    job = TrainingJob(seq_length=2048, global_batch_size=16)
    c = SearchConstraints(
        recompute=("none", "full"),
        optimizer_sharding=("optimizer",),
        moe_a2a_overlap=False,
        moe_dispatcher="alltoall",
    )
    got = rows(enumerate_layouts(model, cluster(16), job, c))
    expected = set()
    for tp, pp, cp, ep, b, rec in itertools.product(
        [1, 2, 4, 8], [1, 2, 4, 8], [1, 2, 4, 8, 16], [1, 2, 4], [1, 2, 4, 8, 16], [0, 2]
    ):
        if 16 % (tp * pp * cp):
            continue
        for vpp in [v for v in range(1, 13 // pp + 1) if _can_split(12, pp, v)]:
            for etp in sorted({1, tp}):
                dp = 16 // (tp * pp * cp)
                expected.add((tp, pp, vpp, cp, ep, etp, dp, b, rec, tp > 1, 1, 0, 0))
    assert got == expected


def test_contains_megatron_facts_case_a_and_it_is_valid() -> None:
    # megatron-facts §8 case A: t=2, p=2, d=4, b=1, SP, selective, dist-opt on 16 GPUs
    job = TrainingJob(seq_length=8192, global_batch_size=128)
    batch = enumerate_layouts(LLAMA_8B, cluster(16), job)
    case_a = Layout(tp=2, pp=2, dp=4, micro_batch_size=1, recompute="selective")
    key = next(iter(rows(LayoutBatch.from_layouts([case_a]))))
    index = [i for i in range(len(batch)) if next(iter(rows(batch.take([i])))) == key]
    assert len(index) == 1
    assert not check_rules(LLAMA_8B, cluster(16), job, batch.take(index)).any()


def test_405b_on_16384_gpus_is_small_and_enumerated_in_numpy() -> None:
    job = TrainingJob(seq_length=8192, global_batch_size=2048)
    batch = enumerate_layouts(LLAMA405B, cluster(16384), job)
    assert 1_000 < len(batch) < 300_000
    assert (batch.num_gpus == 16384).all()
    # 256 GPUs give ~70k layouts, 16384 ~150k: the Python calls stay the same (speed: bench/)
    assert_calls_do_not_grow(
        lambda: enumerate_layouts(LLAMA405B, cluster(256), job),
        lambda: enumerate_layouts(LLAMA405B, cluster(16384), job),
    )


def test_user_sizes_that_cannot_fill_the_cluster_are_explained() -> None:
    batch = enumerate_layouts(LLAMA_8B, cluster(8), JOB, SearchConstraints(tp=3))
    assert len(batch) > 0
    hist = rejection_histogram(LLAMA_8B, cluster(8), JOB, batch)
    assert list(hist) == ["tp*pp*cp*dp must equal the number of GPUs"]
    assert hist[next(iter(hist))] == len(batch)


def test_histogram_counts_first_violated_rule() -> None:
    batch = LayoutBatch.from_columns(
        tp=[3, 3, 1, 4], dp=[2, 8, 24, 6], micro_batch_size=[1, 1, 3, 1]
    )  # row 0: world size first; row 1: heads; row 2: batch; row 3: valid
    job = TrainingJob(seq_length=8192, global_batch_size=96)
    hist = rejection_histogram(LLAMA_8B, cluster(24), job, batch)
    by_id = {r.summary: r.id for r in RULES}
    assert {by_id[k]: v for k, v in hist.items()} == {
        "world_size": 1,
        "heads_divisible_by_tp": 1,
        "global_batch_divisible": 1,
    }


def test_histogram_total_is_number_of_invalid_layouts() -> None:
    batch = enumerate_layouts(MIXTRAL_8X7B, cluster(64), JOB)
    violated = check_rules(MIXTRAL_8X7B, cluster(64), JOB, batch)
    hist = rejection_histogram(MIXTRAL_8X7B, cluster(64), JOB, batch, violated)
    assert sum(hist.values()) == int(violated.any(axis=1).sum()) > 0
    assert list(hist.values()) == sorted(hist.values(), reverse=True)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tp": 0}, "tp=0"),
        ({"pp": (2, -1)}, "pp="),
        ({"tp": ()}, "allows nothing"),
        ({"max_cp": 0}, "max_cp=0"),
        ({"recompute": ("sometimes",)}, "recompute='sometimes'"),
        ({"optimizer_sharding": ()}, "at least one"),
        ({"tp": 16, "max_tp": 8}, "max_tp=8"),
    ],
)
def test_invalid_constraints_raise(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        SearchConstraints(**kwargs)


def test_default_constraints_enumerate_all_recompute_and_sharding_modes_but_fsdp() -> None:
    batch = enumerate_layouts(LLAMA_8B, cluster(8), JOB)
    assert set(batch.recompute.tolist()) == {0, 1, 2}
    assert set(batch.optimizer_sharding.tolist()) == {0, 1}  # full sharding is opt-in
    opt_in = SearchConstraints(optimizer_sharding=("none", "optimizer", "full"))
    assert set(enumerate_layouts(LLAMA_8B, cluster(8), JOB, opt_in).optimizer_sharding) == {0, 1, 2}
    assert np.isin(batch.micro_batch_size, [1, 2, 4, 8, 16, 32, 64, 128]).all()


def test_fixed_vpp_choices_keep_pp1_plain() -> None:
    batch = enumerate_layouts(LLAMA_8B, cluster(16), JOB, SearchConstraints(vpp=(1, 2)))
    assert (batch.vpp[batch.pp == 1] == 1).all()
    assert set(batch.vpp[batch.pp > 1].tolist()) == {1, 2}
