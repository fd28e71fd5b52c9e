"""The MoE all-to-all overlap and a recomputed 'moe' module (megatron-facts rule 40): Megatron
refuses the pair, so 'auto' leaves the overlap off there, and memory, time, rules, flags and the
search agree on it."""

from __future__ import annotations

from planner.layouts import A2A_OFF, LayoutBatch
from planner.megatron.flags import megatron_args
from planner.memory.estimate import estimate_memory
from planner.performance.step_time import default_profile, estimate_performance
from planner.search.evaluate import evaluate_layouts
from planner.space import comm_flags
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.memory_axes import MemoryChoices
from planner.space.rules import violations
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, MIXTRAL_8X7B

JOB = TrainingJob(seq_length=4096, global_batch_size=256)
CLUSTER = ClusterSpec(name="c64", gpu=H100, num_gpus=64)
MOE_REC = Layout(ep=8, dp=64, recompute="selective", recompute_modules=("moe",))
OVERLAP = "--overlap-moe-expert-parallel-comm"


def test_auto_leaves_the_overlap_off_where_moe_is_recomputed() -> None:
    batch = LayoutBatch.from_layouts([MOE_REC, Layout(ep=8, dp=64, recompute="selective")])
    assert comm_flags.allowed(MIXTRAL_8X7B, CLUSTER, batch, tp_overlap_on=True).tolist() == [
        False,
        True,
    ]
    args = megatron_args(MIXTRAL_8X7B, CLUSTER, JOB, MOE_REC)
    assert OVERLAP not in args and "--delay-wgrad-compute" not in args
    assert args[args.index("--recompute-modules") + 1] == "moe"


def test_the_evaluate_repro_emits_flags_megatron_accepts() -> None:
    (result,) = evaluate_layouts(MIXTRAL_8X7B, CLUSTER, JOB, [MOE_REC], default_profile(H100))
    assert result["valid"] and result["layout"]["moe_a2a_overlap"] is False
    assert OVERLAP not in result["megatron"]["args"]
    assert result["megatron"]["env"].get("CUDA_DEVICE_MAX_CONNECTIONS") != comm_flags.CONNECTIONS


def test_memory_and_time_price_auto_as_off_there() -> None:
    off = Layout(**{**MOE_REC.to_dict(), "moe_a2a_overlap": False})
    batch = LayoutBatch.from_layouts([MOE_REC, off])
    mem = estimate_memory(MIXTRAL_8X7B, CLUSTER, JOB, batch)
    assert mem.total_bytes[0] == mem.total_bytes[1]
    perf = estimate_performance(MIXTRAL_8X7B, CLUSTER, JOB, batch, default_profile(H100))
    assert perf.step_time_s[0] == perf.step_time_s[1]


def test_fixing_it_on_is_refused_by_one_rule_naming_the_module() -> None:
    on = Layout(**{**MOE_REC.to_dict(), "moe_a2a_overlap": True})
    (message,) = violations(MIXTRAL_8X7B, CLUSTER, JOB, on)
    assert "moe_a2a_overlap=true" in message and "'moe' in recompute_modules" in message


def test_the_search_never_pairs_the_overlap_with_moe_recompute() -> None:
    constraints = SearchConstraints(
        tp=(1,), pp=(1,), ep=(8,), micro_batch_size=(1,), recompute=("selective",),
        memory=MemoryChoices(search_recompute_modules=True),
    )  # fmt: skip
    batch = enumerate_layouts(MIXTRAL_8X7B, CLUSTER, JOB, constraints)
    moe = comm_flags.moe_recomputed(batch)
    assert moe.any() and (~moe).any()
    off = batch.moe_a2a_overlap == A2A_OFF
    on = (
        comm_flags.allowed(MIXTRAL_8X7B, CLUSTER, batch, tp_overlap_on=True) & ~off
    )  # the rest are 'auto'
    assert not (on & moe).any() and on[~moe].any()
    # no explicit-off twin of an 'auto' row that already resolves off
    assert not (moe & off).any() and off.any()
