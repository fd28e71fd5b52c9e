"""The launch flags of an evaluated layout, under any Megatron-Core / TE release, parse back to the
same layout and software stack (brief evaljudge8 2e): what ``planner evaluate`` answers is what
the emitted argv tells Megatron, for the stack settings and release-dependent spellings too."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from planner.fp8_recipes import FP8_RECIPE_CHOICES, effective_recipe
from planner.megatron.args import parse_megatron_args
from planner.megatron.log_version import infer_core_version
from planner.megatron.memory_flags import fp8_param_gather_on
from planner.performance.step_time import default_profile
from planner.search.evaluate import evaluate_layouts
from planner.space import comm_flags
from planner.specs import ClusterSpec, Layout, ModelSpec, SpecError, TrainingJob
from planner.stack_versions import CORE_VERSIONS, NEWEST_CORE, TE_VERSIONS, parse_version
from tests.planner.fixtures import DEEPSEEK_V3, H100, LLAMA_8B, MIXTRAL_8X7B
from tests.planner.test_stack_versions import FLAG_RELEASES

B200 = replace(H100, name="b200", architecture="blackwell", peak_fp8_flop_per_s=4.5e15)
MODELS = (
    LLAMA_8B,
    replace(LLAMA_8B, name="llama-30-layers", num_layers=30),  # account-for and uneven splits
    MIXTRAL_8X7B,
    replace(DEEPSEEK_V3, num_layers=16, moe_first_dense_layers=1),
)
MODULES = ("core_attn", "mlp", "layernorm", "moe_act")


@st.composite
def stacks(draw: st.DrawFn) -> TrainingJob:
    return TrainingJob(
        seq_length=draw(st.sampled_from([2048, 4096])),
        global_batch_size=draw(st.sampled_from([64, 128, 256])),
        precision=(precision := draw(st.sampled_from(["bf16", "fp8"]))),
        fp8_recipe=draw(st.sampled_from([None, *FP8_RECIPE_CHOICES]))
        if precision == "fp8"
        else None,
        tp_comm_overlap=draw(st.booleans()),
        attention_backend=draw(st.sampled_from(["auto", "flash", "fused", "unfused"])),
        cross_entropy_fusion=draw(st.sampled_from(["native", "unfused"])),
        moe_imbalance=draw(st.sampled_from([1.0, 1.2])),
        megatron_core_version=draw(st.sampled_from([None, *CORE_VERSIONS])),
        te_version=draw(st.sampled_from([None, *TE_VERSIONS[-8:]])),
    )


@st.composite
def layouts(draw: st.DrawFn, model: ModelSpec) -> Layout:
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2, 4, 8]))
    cp = draw(st.sampled_from([1, 2]))
    recompute = draw(st.sampled_from(["none", "selective", "full"]))
    moe: dict[str, Any] = {}
    if model.is_moe:
        moe = {
            "ep": draw(st.sampled_from([1, 2, 4, 8])),
            "etp": draw(st.sampled_from([1, tp])),
            "moe_dispatcher": draw(st.sampled_from([None, "alltoall", "flex"])),
            "moe_a2a_overlap": draw(st.sampled_from([None, False])),
        }
    modules = None
    if recompute == "selective" and draw(st.booleans()):
        chosen = draw(st.sets(st.sampled_from(MODULES), min_size=1))
        modules = tuple(m for m in MODULES if m in chosen)
    return Layout(
        tp=tp, pp=pp, vpp=draw(st.sampled_from([1, 2, 4])) if pp > 1 else 1, cp=cp,
        cp_comm_type=draw(st.sampled_from([None, "p2p", "all_gather"])) if cp > 1 else None,
        dp=draw(st.sampled_from([1, 2, 4])), micro_batch_size=1, recompute=recompute,
        recompute_modules=modules,
        cuda_graphs=draw(st.sampled_from(["none", "partial", "full_iteration"])),
        optimizer_sharding=draw(st.sampled_from(["none", "optimizer"])),
        **moe,
    )  # fmt: skip


@st.composite
def cases(draw: st.DrawFn) -> tuple[ModelSpec, ClusterSpec, TrainingJob, Layout]:
    model = draw(st.sampled_from(MODELS))
    layout = draw(layouts(model))
    gpu = draw(st.sampled_from([H100, B200]))
    cluster = ClusterSpec(name="c", gpu=gpu, num_gpus=layout.num_gpus, gpus_per_node=8)
    try:
        job = draw(stacks())
    except SpecError:  # a stack its own releases refuse (TrainingJob checks itself)
        assume(False)
        raise
    return model, cluster, job, layout


def _arguments_block(argv: list[str]) -> dict[str, str]:
    """The argv as Megatron's arguments block prints it (``name: value``), for the release
    fingerprints of :func:`infer_core_version`."""
    block: dict[str, str] = {}
    for i, token in enumerate(argv):
        if token.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            block[token[2:].replace("-", "_")] = "True" if nxt.startswith("--") else nxt
    return block


def _effective(layout: Layout, job: TrainingJob) -> dict[str, Any]:
    """The layout's fields, the fp8 parameter gather as what runs ("auto" resolved)."""
    gather = layout.fp8_param_gather
    if gather is None:
        gather = bool(fp8_param_gather_on(job.precision, layout))
    return layout.to_dict() | {"fp8_param_gather": gather}


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(cases())
def test_evaluated_flags_parse_back_to_the_evaluated_layout_and_stack(case: Any) -> None:
    model, cluster, job, layout = case
    (result,) = evaluate_layouts(model, cluster, job, [layout], default_profile(cluster.gpu))
    assume(result["valid"])
    event(f"{model.name} core {job.megatron_core_version} graphs {layout.cuda_graphs}")
    args, env = result["megatron"]["args"], result["megatron"]["env"]
    # before core 0.11 the attention backend is TE's environment, not a flag (loose9 item 1)
    parsed = parse_megatron_args(args, world_size=layout.num_gpus, env=env)
    evaluated = Layout(**result["layout"])
    assert _effective(parsed.layout, job) == _effective(evaluated, job)
    assert parsed.stack_fields == {
        "tp_comm_overlap": job.tp_comm_overlap
        and bool(comm_flags.tp_comm_overlap(cluster, layout.tp, parsed.layout.sequence_parallel)),
        "attention_backend": job.attention_backend,
        "cross_entropy_fusion": job.cross_entropy_fusion,
        "moe_imbalance": job.moe_imbalance
        if model.is_moe
        else parsed.stack_fields["moe_imbalance"],
        # the recipe that runs: the job's or the planner's (no flag before core 0.12: delayed)
        **({"fp8_recipe": effective_recipe(job, cluster.gpu)} if job.precision == "fp8" else {}),
    }
    assert (parsed.seq_length, parsed.global_batch_size, parsed.precision) == (
        job.seq_length,
        job.global_batch_size,
        job.precision,
    )
    # no flag foreign to the release the job names (mechanisms-facts §7-8, written out in
    # test_stack_versions), nor a release fingerprint newer than it
    version = parse_version("megatron_core_version", job.megatron_core_version or NEWEST_CORE)
    for flag in args:
        first, last = FLAG_RELEASES.get(flag, ((0, 4), None))
        assert first <= version and (last is None or version <= last), (flag, version)
    assert ("--attention-backend" in args) == (version >= (0, 11))
    assert not (version >= (0, 11) and any(k.startswith("NVTE_") and "ATTN" in k for k in env))
    inferred = infer_core_version(_arguments_block(args))
    if inferred is not None and job.megatron_core_version is not None:
        oldest = parse_version("megatron_core_version", inferred[0])
        assert oldest <= parse_version("megatron_core_version", job.megatron_core_version), inferred


# --- the defects the round trip found, one behaviour each ----------------------------------------

OLD_CORE = TrainingJob(seq_length=2048, global_batch_size=64, megatron_core_version="0.8")


def _evaluate(model: ModelSpec, job: TrainingJob, layout: Layout) -> dict[str, Any]:
    cluster = ClusterSpec(name="c", gpu=H100, num_gpus=layout.num_gpus, gpus_per_node=8)
    (result,) = evaluate_layouts(model, cluster, job, [layout], default_profile(H100))
    return result


def test_a_dense_layout_on_an_old_core_states_no_moe_dispatcher() -> None:
    # core 0.8 lacks DeepEP, so MoE layouts are pinned to alltoall; a dense one has no dispatcher
    result = _evaluate(LLAMA_8B, OLD_CORE, Layout(tp=2, dp=4))
    assert result["layout"]["moe_dispatcher"] is None
    assert result["layout"]["fp8_param_gather"] is None  # a bf16 job gathers no fp8 weights
    assert "--moe-token-dispatcher-type" not in result["megatron"]["args"]


def test_an_open_cp_type_without_a_ring_model_is_stated_as_p2p() -> None:
    # the fixture's H100 has no collective curves: the planner prices Megatron's default ring
    result = _evaluate(LLAMA_8B, OLD_CORE, Layout(cp=2, dp=1))
    assert result["layout"]["cp_comm_type"] == "p2p"
    parsed = parse_megatron_args(result["megatron"]["args"], world_size=2)
    assert parsed.layout.cp_comm_type == "p2p"
