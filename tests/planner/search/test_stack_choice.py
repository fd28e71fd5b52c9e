"""The search chooses the stack settings the request leaves open (issue 12 item 1): CUDA graphs
for its best candidates and the CP communication type of every cp > 1 layout; each choice shows
in the plan's layout, its launch flags and the funnel."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models_db import load_gpu
from planner.layouts import LayoutBatch
from planner.megatron.flags import launch_spec
from planner.memory.estimate import MemoryOptions, estimate_memory
from planner.performance.step_time import default_profile, estimate_performance
from planner.search.planning import PlanResult, plan
from planner.search.stack_choice import GRAPH_CANDIDATES, MIN_GRAPH_GAIN
from planner.space.enumeration import SearchConstraints
from planner.space.memory_axes import MemoryChoices
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

CLUSTER = ClusterSpec(name="t", gpu=H100, num_gpus=64)
SHORT = TrainingJob(seq_length=1024, global_batch_size=64)
# a host-bound stack: 300 us per kernel launch (an eager, Python-heavy build) makes the
# launches a graph removes worth more than MIN_GRAPH_GAIN of the step
HOST_BOUND = replace(default_profile(H100), host_kernel_s=300e-6)


@pytest.fixture(scope="module")
def host_bound() -> PlanResult:
    return plan(LLAMA_8B, CLUSTER, SHORT, profile=HOST_BOUND, top_k=3)


def _speed(layout: Layout, graphs: str) -> float:
    batch = LayoutBatch.from_layouts([replace(layout, cuda_graphs=graphs)])  # type: ignore[arg-type]
    perf = estimate_performance(LLAMA_8B, CLUSTER, SHORT, batch, HOST_BOUND)
    return float(perf.tokens_per_s_per_gpu[0])


def test_a_host_bound_search_chooses_graphs_where_they_gain(host_bound: PlanResult) -> None:
    best = host_bound.plans[0]
    assert best.layout.cuda_graphs in ("partial", "full_iteration")
    got = best.performance["tokens_per_s_per_gpu"]
    assert got == pytest.approx(_speed(best.layout, best.layout.cuda_graphs))  # priced as chosen
    assert got >= (1 + MIN_GRAPH_GAIN) * _speed(best.layout, "none")


def test_the_choice_is_in_the_flags_and_the_funnel(host_bound: PlanResult) -> None:
    best = host_bound.plans[0]
    args = launch_spec(LLAMA_8B, CLUSTER, SHORT, best.layout).args
    assert "--cuda-graph-impl" in args
    funnel = host_bound.to_dict()["funnel"]
    chosen = funnel["choices"]["cuda_graphs"]
    assert sum(chosen.values()) == min(GRAPH_CANDIDATES, host_bound.search.evaluated)
    assert chosen.get(best.layout.cuda_graphs, 0) >= 1
    assert "cuda_graphs" in funnel["choices_sentence"]


def test_a_fixed_mode_is_kept_and_nothing_is_chosen() -> None:
    fixed = SearchConstraints(memory=MemoryChoices(cuda_graphs="none"))
    result = plan(LLAMA_8B, CLUSTER, SHORT, constraints=fixed, profile=HOST_BOUND, top_k=3)
    assert {p.layout.cuda_graphs for p in result.plans} == {"none"}
    assert "cuda_graphs" not in result.choices


def test_a_gain_under_the_threshold_keeps_the_eager_mode() -> None:
    # the shipped priors (5 us per launch): graphs save well under 1 % of a Llama 8B step
    result = plan(LLAMA_8B, CLUSTER, SHORT, profile=default_profile(H100), top_k=3)
    assert {p.layout.cuda_graphs for p in result.plans} == {"none"}
    assert set(result.choices["cuda_graphs"]) == {"none"}


def test_graphs_that_do_not_fit_are_not_chosen(host_bound: PlanResult) -> None:
    # partial graphs cost memory (graph buffers): with the threshold at the eager footprint of
    # the layout that wins with them, that layout may no longer take them
    best = host_bound.plans[0]
    assert best.layout.cuda_graphs == "partial"
    eager = LayoutBatch.from_layouts([replace(best.layout, cuda_graphs="none")])
    need = estimate_memory(LLAMA_8B, CLUSTER, SHORT, eager, MemoryOptions())
    tight = float(need.total_bytes[0] / need.capacity_bytes) + 1e-9
    result = plan(LLAMA_8B, CLUSTER, SHORT, profile=HOST_BOUND, top_k=64, threshold=tight)
    same = [p for p in result.plans if replace(p.layout, cuda_graphs="none") == eager.layout(0)]
    assert same and all(p.layout.cuda_graphs != "partial" for p in same)
    assert all(p.memory["fits"] for p in result.plans)


def test_the_cp_type_of_every_long_sequence_layout_is_chosen_and_counted() -> None:
    job = TrainingJob(seq_length=32768, global_batch_size=16)
    gpu = load_gpu("h100-sxm-80gb")  # the catalog's: its collective curves price the CP types
    cluster = ClusterSpec(name="t", gpu=gpu, num_gpus=16)
    result = plan(LLAMA_8B, cluster, job, profile=default_profile(gpu), top_k=5)
    assert result.pool is not None
    cp_rows = int(np.sum(result.pool.batch.cp > 1))
    counted = result.choices["cp_comm_type"]
    assert cp_rows > 0 and sum(counted.values()) == cp_rows
    for p in result.plans:
        if p.layout.cp > 1:
            assert p.layout.cp_comm_type is not None
            args = launch_spec(LLAMA_8B, cluster, job, p.layout).args
            if p.layout.cp_comm_type != "p2p":
                assert args[args.index("--cp-comm-type") + 1] == p.layout.cp_comm_type


def test_rule_chosen_settings_are_resolved_in_every_plan() -> None:
    """moe_a2a_overlap and moe_dispatcher left open are resolved per layout by Megatron's rules
    (planner.space.comm_flags), and tp_comm_overlap=True is on exactly where it is allowed."""
    gpu = load_gpu("h100-sxm-80gb")
    cluster = ClusterSpec(name="t", gpu=gpu, num_gpus=64)
    job = TrainingJob(seq_length=4096, global_batch_size=256)
    result = plan(MIXTRAL_8X7B, cluster, job, profile=default_profile(gpu), top_k=10)
    assert result.plans
    for p in result.plans:
        assert p.layout.moe_dispatcher in ("alltoall", "flex")
        assert isinstance(p.layout.moe_a2a_overlap, bool)
        args = launch_spec(MIXTRAL_8X7B, cluster, job, p.layout).args
        overlap = "--tp-comm-overlap" in args
        assert overlap == (p.layout.tp > 1 and bool(p.layout.sequence_parallel))
        assert ("--overlap-moe-expert-parallel-comm" in args) == p.layout.moe_a2a_overlap
