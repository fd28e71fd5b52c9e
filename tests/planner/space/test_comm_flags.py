"""The MoE all-to-all overlap: where Megatron allows it, its flags, and what it changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner.layouts import RECOMPUTE_FULL, LayoutBatch
from planner.megatron.flags import launch_spec, megatron_args
from planner.memory.estimate import estimate_memory
from planner.performance.step_time import default_profile, estimate_performance
from planner.space import comm_flags
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.rules import violations
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, MIXTRAL_8X7B

DENSE = replace(MIXTRAL_8X7B, name="dense", num_experts=None)
JOB = TrainingJob(seq_length=4096, global_batch_size=256)


def cluster(n: int) -> ClusterSpec:
    return ClusterSpec(name=f"c{n}", gpu=H100, num_gpus=n)


def test_auto_turns_it_on_for_expert_parallel_layouts_megatron_accepts() -> None:
    c = cluster(64)
    on = [
        Layout(ep=8, dp=64),  # pp = 1
        Layout(pp=2, vpp=2, ep=8, dp=32),  # interleaved
        Layout(tp=2, ep=8, etp=1, dp=32, sequence_parallel=False),  # no tp-comm-overlap
    ]
    off = [
        Layout(dp=64),  # ep = 1
        Layout(pp=2, ep=8, dp=32),  # pp > 1 without vpp (rule 16)
        Layout(ep=8, dp=64, recompute="full"),  # rule 40
        Layout(tp=2, ep=8, etp=1, dp=32),  # --tp-comm-overlap wants CUDA_DEVICE_MAX_CONNECTIONS=1
        Layout(ep=8, dp=64, moe_a2a_overlap=False),  # the user's choice
    ]
    got = comm_flags.enabled(
        MIXTRAL_8X7B, c, LayoutBatch.from_layouts(on + off), tp_overlap_on=True
    )
    assert got.tolist() == [True] * len(on) + [False] * len(off)
    assert not comm_flags.resolve(DENSE, c, Layout(dp=64), tp_overlap_on=True).moe_a2a_overlap


def test_flags_and_environment_follow_the_resolved_choice() -> None:
    c = cluster(64)
    spec = launch_spec(MIXTRAL_8X7B, c, JOB, Layout(ep=8, dp=64))
    assert set(comm_flags.A2A_FLAGS) <= set(spec.args)
    assert spec.env["CUDA_DEVICE_MAX_CONNECTIONS"] == comm_flags.CONNECTIONS
    plain = launch_spec(MIXTRAL_8X7B, c, JOB, Layout(tp=2, ep=8, etp=1, dp=32))
    assert "--overlap-moe-expert-parallel-comm" not in plain.args
    assert plain.env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert "--overlap-moe-expert-parallel-comm" not in megatron_args(
        MIXTRAL_8X7B, c, JOB, Layout(ep=8, dp=64, moe_a2a_overlap=False)
    )


def test_asking_for_it_where_megatron_refuses_names_the_reason() -> None:
    messages = violations(
        MIXTRAL_8X7B, cluster(64), JOB, Layout(pp=2, ep=8, dp=32, moe_a2a_overlap=True)
    )
    assert len(messages) == 1
    assert "moe_a2a_overlap=true" in messages[0] and "vpp >= 2" in messages[0]
    assert (
        violations(MIXTRAL_8X7B, cluster(64), JOB, Layout(ep=8, dp=64, moe_a2a_overlap=True)) == []
    )


def test_overlap_hides_all_to_all_time_but_never_more_than_the_compute() -> None:
    c = cluster(64)
    layouts = [Layout(ep=8, dp=64, moe_a2a_overlap=v) for v in (False, True)]
    est = estimate_performance(
        MIXTRAL_8X7B, c, JOB, LayoutBatch.from_layouts(layouts), default_profile(H100)
    )
    off, on = est.breakdown["ep_comm_s"]
    assert on < off
    hidden = off - on
    assert hidden <= est.breakdown["compute_s"][1] + 1e-12
    assert est.step_time_s[1] < est.step_time_s[0]
    none = default_profile(H100).with_coefficients(ep_overlap=0.0)
    flat = estimate_performance(MIXTRAL_8X7B, c, JOB, LayoutBatch.from_layouts(layouts), none)
    assert flat.breakdown["ep_comm_s"][1] == pytest.approx(flat.breakdown["ep_comm_s"][0])


def test_overlap_holds_more_activations() -> None:  # one layer: tests/planner/memory/test_moe_terms
    c = cluster(64)
    layouts = [Layout(pp=2, vpp=2, ep=8, dp=32, moe_a2a_overlap=v) for v in (False, True)]
    mem = estimate_memory(MIXTRAL_8X7B, c, JOB, LayoutBatch.from_layouts(layouts))
    off, on = mem.first_stage_terms["activations_bytes"]
    assert on > off


def test_on_blackwell_it_combines_with_tp_comm_overlap() -> None:
    b200 = ClusterSpec(
        name="b", gpu=replace(H100, name="b200", architecture="blackwell"), num_gpus=64
    )
    layout = Layout(tp=2, ep=8, etp=1, dp=32)
    args = megatron_args(MIXTRAL_8X7B, b200, JOB, layout)
    assert "--tp-comm-overlap" in args and "--overlap-moe-expert-parallel-comm" in args


def test_fp8_jobs_gather_fp8_weights_with_the_distributed_optimizer() -> None:
    c = cluster(64)
    fp8 = TrainingJob(seq_length=4096, global_batch_size=256, precision="fp8")
    dist, plain = Layout(ep=8, dp=64), Layout(ep=8, dp=64, optimizer_sharding="none")
    assert "--fp8-param-gather" in megatron_args(MIXTRAL_8X7B, c, fp8, dist)
    assert "--fp8-param-gather" not in megatron_args(MIXTRAL_8X7B, c, fp8, plain)  # rule 53
    assert "--fp8-param-gather" not in megatron_args(MIXTRAL_8X7B, c, JOB, dist)
    mem = estimate_memory(MIXTRAL_8X7B, c, fp8, LayoutBatch.from_layouts([dist, plain]))
    weights, fp8_copies = (mem.first_stage_terms[k] for k in ("weights_bytes", "fp8_bytes"))
    # fp8 weights (1 byte) replace bf16 ones (2) and the separate fp8 copy: 2 bytes saved
    linear = mem.first_stage_terms["fp8_bytes"][1] / 2.0
    saved = (
        mem.first_stage_terms["weights_bytes"][1]
        + mem.first_stage_terms["fp8_bytes"][1]
        - mem.first_stage_terms["weights_bytes"][0]
        - mem.first_stage_terms["fp8_bytes"][0]
    )
    assert saved == pytest.approx(2.0 * linear)
    assert weights[0] < weights[1] and fp8_copies[0] < fp8_copies[1]


def test_flex_dispatcher_is_picked_where_the_expert_group_spans_nodes() -> None:
    c = cluster(64)
    spans, inside = Layout(tp=2, ep=8, etp=2, dp=32), Layout(tp=2, ep=8, etp=1, dp=32)
    assert comm_flags.resolve(MIXTRAL_8X7B, c, spans, tp_overlap_on=True).moe_dispatcher == "flex"
    assert (
        comm_flags.resolve(MIXTRAL_8X7B, c, inside, tp_overlap_on=True).moe_dispatcher == "alltoall"
    )
    assert comm_flags.resolve(DENSE, c, Layout(dp=64), tp_overlap_on=True).moe_dispatcher is None
    spec = launch_spec(MIXTRAL_8X7B, c, JOB, spans)
    assert "--moe-flex-dispatcher-backend" in spec.args and "flex" in spec.args
    assert any("DeepEP" in note for note in spec.notes)
    forced = replace(spans, moe_dispatcher="alltoall")
    assert "--moe-flex-dispatcher-backend" not in megatron_args(MIXTRAL_8X7B, c, JOB, forced)


def test_flex_sends_one_copy_per_destination_node() -> None:
    assert comm_flags.distinct_node_share(1, 8) == pytest.approx(1 / 8)  # one node: one copy
    assert comm_flags.distinct_node_share(4, 1) == pytest.approx(1.0)
    assert comm_flags.distinct_node_share(8, 8) == pytest.approx(1 - (7 / 8) ** 8)
    c = cluster(64)
    layouts = [Layout(tp=2, ep=8, etp=2, dp=32, moe_dispatcher=d) for d in ("alltoall", "flex")]
    est = estimate_performance(
        MIXTRAL_8X7B, c, JOB, LayoutBatch.from_layouts(layouts), default_profile(H100)
    )
    nccl, deepep = est.breakdown["ep_comm_s"]
    assert deepep < nccl


def test_flex_on_a_gpu_without_deepep_is_refused() -> None:
    a100 = ClusterSpec(name="a", gpu=replace(H100, architecture="ampere"), num_gpus=64)
    layout = Layout(tp=2, ep=8, etp=2, dp=32)
    assert (
        comm_flags.resolve(MIXTRAL_8X7B, a100, layout, tp_overlap_on=True).moe_dispatcher
        == "alltoall"
    )
    messages = violations(MIXTRAL_8X7B, a100, JOB, replace(layout, moe_dispatcher="flex"))
    assert any("DeepEP" in m for m in messages)


def test_tp_and_a2a_overlap_share_one_compute_window() -> None:
    """On Blackwell both overlaps are emitted; together they cannot hide more than the compute."""
    b200 = ClusterSpec(
        name="b", gpu=replace(H100, name="b200", architecture="blackwell"), num_gpus=64
    )
    layout = Layout(tp=8, ep=8, etp=1, dp=8, moe_a2a_overlap=True)
    job = TrainingJob(seq_length=4096, global_batch_size=64)
    est = estimate_performance(
        MIXTRAL_8X7B, b200, job, LayoutBatch.from_layouts([layout]), default_profile(H100)
    )
    compute = est.breakdown["compute_s"][0]
    exposed = est.breakdown["tp_comm_s"][0] + est.breakdown["ep_comm_s"][0]
    off = estimate_performance(
        MIXTRAL_8X7B, b200, job,
        LayoutBatch.from_layouts([replace(layout, moe_a2a_overlap=False)]),
        default_profile(H100).with_coefficients(tp_overlap=0.0),
    )  # fmt: skip
    total = off.breakdown["tp_comm_s"][0] + off.breakdown["ep_comm_s"][0]
    assert total - exposed <= compute * (1 + 1e-9)


def test_on_hopper_a_job_without_tp_comm_overlap_may_ask_for_it_with_tp() -> None:
    """The refusal with tp > 1 before Blackwell is about --tp-comm-overlap's
    CUDA_DEVICE_MAX_CONNECTIONS=1; a job that turns TP overlap off emits no such flag, as the
    DeepSeek-V3 H100 card's EP-overlap run (mechanisms-facts §3.5) must have."""
    layout = Layout(tp=2, ep=8, etp=1, dp=32, moe_a2a_overlap=True)
    assert violations(MIXTRAL_8X7B, cluster(64), JOB, layout) != []
    no_tp_overlap = replace(JOB, tp_comm_overlap=False)
    assert violations(MIXTRAL_8X7B, cluster(64), no_tp_overlap, layout) == []
    spec = launch_spec(MIXTRAL_8X7B, cluster(64), no_tp_overlap, layout)
    assert "--tp-comm-overlap" not in spec.args
    assert set(comm_flags.A2A_FLAGS) <= set(spec.args)
    assert spec.env["CUDA_DEVICE_MAX_CONNECTIONS"] == comm_flags.CONNECTIONS
    auto = LayoutBatch.from_layouts([Layout(tp=2, ep=8, etp=1, dp=32)])
    assert not comm_flags.enabled(MIXTRAL_8X7B, cluster(64), auto, tp_overlap_on=True)[0]
    assert comm_flags.enabled(MIXTRAL_8X7B, cluster(64), auto, tp_overlap_on=False)[0]


def _a2a_of_tp2_layouts(job: TrainingJob) -> set[bool]:
    """The A2A overlap values the search space tries for tp = 2 expert-parallel layouts."""
    batch = enumerate_layouts(
        MIXTRAL_8X7B, cluster(64), job, SearchConstraints(tp=(2,), pp=(1,), ep=(8,))
    )
    keep = (batch.tp == 2) & batch.sequence_parallel & (batch.recompute != RECOMPUTE_FULL)
    on = comm_flags.enabled(MIXTRAL_8X7B, cluster(64), batch, tp_overlap_on=job.tp_comm_overlap)
    return {bool(x) for x in on[keep]}


def test_auto_tries_it_with_tp_when_the_job_turns_tp_comm_overlap_off() -> None:
    """Both sides of the clash rule in 'auto' mode: with --tp-comm-overlap (the default) the
    search never turns the A2A overlap on for a tp = 2 layout on Hopper; with the job's
    tp_comm_overlap off it tries both on and off."""
    assert _a2a_of_tp2_layouts(JOB) == {False}
    assert _a2a_of_tp2_layouts(replace(JOB, tp_comm_overlap=False)) == {False, True}


def test_auto_resolves_the_same_way_in_memory_time_and_flags() -> None:
    """An evaluated tp = 2 layout left on auto, under a job without TP overlap: the flags,
    the memory estimate (one more layer in flight) and the reported layout all have it on."""
    job = replace(JOB, tp_comm_overlap=False)
    layout = Layout(tp=2, ep=8, etp=1, dp=32)
    spec = launch_spec(MIXTRAL_8X7B, cluster(64), job, layout)
    assert set(comm_flags.A2A_FLAGS) <= set(spec.args)
    assert comm_flags.resolve(
        MIXTRAL_8X7B, cluster(64), layout, tp_overlap_on=False
    ).moe_a2a_overlap
    auto = estimate_memory(MIXTRAL_8X7B, cluster(64), job, LayoutBatch.from_layouts([layout]))
    on = LayoutBatch.from_layouts([replace(layout, moe_a2a_overlap=True)])
    assert auto.total_bytes[0] == estimate_memory(MIXTRAL_8X7B, cluster(64), job, on).total_bytes[0]
    with_tp = launch_spec(MIXTRAL_8X7B, cluster(64), JOB, layout)
    assert "--overlap-moe-expert-parallel-comm" not in with_tp.args
