"""``cp_comm_type`` (issue 12 item 3): priced, searched, checked, emitted and parsed back."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models_db.catalog import load_gpu
from planner import ClusterSpec, Layout, LayoutBatch, SpecError, TrainingJob
from planner.megatron.args import parse_megatron_args
from planner.megatron.flags import launch_spec, megatron_args
from planner.megatron.log_stack import stack_columns
from planner.performance.step_time import default_profile, estimate_performance
from planner.search.cp_choice import choose_cp_comm
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.rules import violations
from tests.planner.fixtures import LLAMA_70B

GPU = load_gpu("h100-sxm-80gb")
JOB = TrainingJob(seq_length=65536, global_batch_size=64)


def cluster(num_gpus: int = 64) -> ClusterSpec:
    return ClusterSpec(name="h", gpu=GPU, num_gpus=num_gpus, gpus_per_node=8)


def test_layout_rejects_the_help_text_spelling() -> None:
    with pytest.raises(SpecError, match="cp_comm_type='allgather' is not one of p2p, all_gather"):
        Layout(cp=2, cp_comm_type="allgather")  # type: ignore[arg-type]


def test_each_type_prices_differently_and_none_is_p2p() -> None:
    # tp 2, cp 8: the CP group spans two nodes with 4 ranks on each (a2a+p2p: c1 4, c2 2)
    base = Layout(tp=2, cp=8, dp=4, pp=1)
    kinds = (None, "p2p", "all_gather", "a2a", "a2a+p2p")
    batch = LayoutBatch.from_layouts([replace(base, cp_comm_type=k) for k in kinds])
    est = estimate_performance(LLAMA_70B, cluster(), JOB, batch, default_profile(GPU))
    step = est.step_time_s
    assert step[0] == step[1]
    assert len({round(float(x), 9) for x in step[1:]}) == 4
    # a2a cannot split 4 KV heads per rank over cp 8 (a rule says so): priced out, not NaN
    assert np.all(np.isfinite(step)) and step[3] > 1e3 * step[1]


def test_a2a_needs_cp_to_divide_the_heads_per_tp_rank() -> None:
    # 8 KV heads / tp 2 = 4 per rank: cp 8 cannot split them
    msgs = violations(LLAMA_70B, cluster(), JOB, Layout(tp=2, cp=8, dp=4, cp_comm_type="a2a"))
    assert any("cp=8 must divide" in m and "4 KV heads" in m for m in msgs)
    assert not violations(LLAMA_70B, cluster(), JOB, Layout(tp=2, cp=4, dp=8, cp_comm_type="a2a"))


def test_a2a_p2p_needs_a_group_across_nodes() -> None:
    lay = Layout(tp=2, cp=4, dp=8, cp_comm_type="a2a+p2p")  # 4 CP ranks in one node: c2 = 1
    msgs = violations(LLAMA_70B, cluster(), JOB, lay)
    assert any("c1=4, c2=1" in m for m in msgs)


def test_search_gives_open_layouts_the_fastest_valid_type() -> None:
    batch = enumerate_layouts(LLAMA_70B, cluster(), JOB, SearchConstraints(tp=(2,), cp=(4, 8)))
    assert set(batch.cp_comm_codes) == {-1}  # open until the search chooses
    chosen = choose_cp_comm(LLAMA_70B, cluster(), JOB, batch)
    profile = default_profile(GPU)
    for i in np.flatnonzero(chosen.cp > 1)[:: max(1, len(chosen) // 6)]:
        lay = chosen.layout(int(i))
        assert lay.cp_comm_type is not None
        tried = [
            replace(lay, cp_comm_type=k)
            for k in ("p2p", "all_gather", "a2a", "a2a+p2p")
            if not violations(LLAMA_70B, cluster(), JOB, replace(lay, cp_comm_type=k))
        ]
        assert replace(lay, cp_comm_type=lay.cp_comm_type) in tried
        est = estimate_performance(
            LLAMA_70B, cluster(), JOB, LayoutBatch.from_layouts(tried), profile
        )
        # the choice is the fastest of the valid types (the CP attention decides)
        assert est.step_time_s[tried.index(lay)] == pytest.approx(min(est.step_time_s), rel=2e-3)
    fixed = enumerate_layouts(
        LLAMA_70B, cluster(), JOB, SearchConstraints(tp=(2,), cp=(8,), cp_comm_type="p2p")
    )
    assert choose_cp_comm(LLAMA_70B, cluster(), JOB, fixed).cp_comm_value(0) == "p2p"


def test_flags_round_trip_with_hierarchical_sizes() -> None:
    lay = Layout(tp=2, cp=8, dp=4, cp_comm_type="a2a+p2p")
    argv = megatron_args(LLAMA_70B, cluster(), JOB, lay)
    i = argv.index("--cp-comm-type")
    assert argv[i : i + 5] == [
        "--cp-comm-type",
        "a2a+p2p",
        "--hierarchical-context-parallel-sizes",
        "4",
        "2",
    ]
    assert parse_megatron_args(argv, world_size=64).layout.cp_comm_type == "a2a+p2p"
    notes = launch_spec(LLAMA_70B, cluster(), JOB, lay).notes
    assert any("Transformer Engine >= 1.12" in n for n in notes)


def test_default_p2p_emits_no_flag_and_parses_back_to_p2p() -> None:
    # no flag = Megatron's default ring; None would mean "the planner chooses" when fed back
    argv = megatron_args(LLAMA_70B, cluster(), JOB, Layout(tp=2, cp=8, dp=4, cp_comm_type="p2p"))
    assert "--cp-comm-type" not in argv
    assert parse_megatron_args(argv, world_size=64).layout.cp_comm_type == "p2p"
    no_cp = megatron_args(LLAMA_70B, cluster(), JOB, Layout(tp=2, dp=32))
    assert parse_megatron_args(no_cp, world_size=64).layout.cp_comm_type is None


def test_a_per_layer_mix_is_refused_by_name() -> None:
    argv = megatron_args(LLAMA_70B, cluster(), JOB, Layout(tp=2, cp=8, dp=4))
    with pytest.raises(SpecError, match="mixes a2a, p2p across layers") as err:
        parse_megatron_args([*argv, "--cp-comm-type", "p2p", "a2a"], world_size=64)
    assert err.value.field == "cp_comm_type"


def test_log_arguments_give_the_measurement_column() -> None:
    derived: list[str] = []
    assert stack_columns({"cp_comm_type": "['a2a']"}, derived)["cp_comm_type"] == "a2a"
    old = stack_columns({"context_parallel_size": "2"}, derived)
    assert old["cp_comm_type"] == "p2p"
    assert any("predates" in d for d in derived)
