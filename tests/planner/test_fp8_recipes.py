"""The job's fp8 recipe (planner.fp8_recipes): validation, the planner's default per GPU and
release, the GPU rule, and what it changes in speed (planner.performance.fp8_recipe_cost) and
memory (planner.memory.fp8_saved)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planner.fp8_recipes import default_recipe, effective_recipe
from planner.layouts import LayoutBatch
from planner.memory.estimate import estimate_memory
from planner.memory.fp8_saved import BLOCK_SCALE_FRACTION
from planner.performance.compute import elementwise_bytes_per_token, gemms_time
from planner.performance.context import step_context
from planner.performance.fp8_recipe_cost import BLOCKWISE_GEMM_RATE
from planner.performance.step_time import default_profile, estimate_performance
from planner.space.rules import violations
from planner.space.version_check import check_settings
from planner.specs import ClusterSpec, Layout, SpecError, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

B200 = replace(H100, name="b200-like", architecture="blackwell", peak_fp8_flop_per_s=4.5e15)
A100 = replace(H100, name="a100-like", architecture="ampere", peak_fp8_flop_per_s=None)
LAYOUT = Layout(tp=2, dp=4, sequence_parallel=True)


def job(**kw: Any) -> TrainingJob:
    return TrainingJob(seq_length=4096, global_batch_size=64, **{"precision": "fp8", **kw})


def cluster(gpu: Any = H100) -> ClusterSpec:
    return ClusterSpec(name="c8", gpu=gpu, num_gpus=8, gpus_per_node=8)


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"precision": "bf16", "fp8_recipe": "tensorwise"},
         "applies to fp8 training only, and precision='bf16': set precision='fp8', or remove"),
        ({"fp8_recipe": "custom"}, "user Python code the planner cannot price"),
        ({"fp8_recipe": "nvfp4"}, "--fp4-recipe"),
        ({"fp8_recipe": "current"}, "use delayed, tensorwise, blockwise, mxfp8"),
        ({"fp8_recipe": "tensorwise", "megatron_core_version": "0.11"},
         "fp8_recipe='tensorwise' needs Megatron-Core >= 0.12"),
        ({"fp8_recipe": "blockwise", "te_version": "2.2"},
         "fp8_recipe='blockwise' needs Transformer Engine >= 2.3"),
        ({"fp8_recipe": "mxfp8", "te_version": "1.14"}, "needs Transformer Engine >= 2.0"),
        ({"fp8_recipe": "tensorwise", "megatron_core_version": "24.07"},
         "needs Megatron-Core >= 0.12"),  # NeMo 24.07 = core 0.8
    ],
)  # fmt: skip
def test_a_bad_recipe_names_the_field_and_the_fix(kw: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError, match=r"leave|remove|use") as err:
        job(**kw)
    assert err.value.field == "fp8_recipe"
    assert words in str(err.value)


def test_a_bf16_job_leaves_the_recipe_unset() -> None:
    assert job(precision="bf16").fp8_recipe is None
    assert effective_recipe(job(precision="bf16"), H100) is None


@pytest.mark.parametrize(
    ("gpu", "recipe", "other"),
    [(H100, "mxfp8", "'tensorwise'"), (B200, "blockwise", "'mxfp8'"),
     (replace(H100, architecture="ampere"), "mxfp8", "'delayed' or 'tensorwise'")],
)  # fmt: skip
def test_a_recipe_off_its_gpu_is_refused_up_front_and_per_layout(
    gpu: Any, recipe: str, other: str
) -> None:
    j = job(fp8_recipe=recipe)
    with pytest.raises(SpecError, match=f"runs on .* GPUs only.*use fp8_recipe={other}") as err:
        check_settings(LLAMA_8B, cluster(gpu), j, {})
    assert err.value.field == "fp8_recipe"
    found = violations(LLAMA_8B, cluster(gpu), j, LAYOUT)
    assert any("fp8_recipe=" in v and "GPUs only" in v for v in found)


def test_a_recipe_off_its_gpu_suggests_only_what_the_release_has_too() -> None:
    """Hopper with TE 2.1 has no current scaling (TE 2.2): mxfp8 there was told to use
    'tensorwise', which the release then refused; now only 'delayed' is suggested."""
    j = job(fp8_recipe="mxfp8", te_version="2.1")
    with pytest.raises(SpecError, match="use fp8_recipe='delayed', or leave it unset") as err:
        check_settings(LLAMA_8B, cluster(H100), j, {})
    assert "tensorwise" not in str(err.value)


def test_a_recipe_the_release_lacks_marks_the_one_generation_suggestions() -> None:
    """The job's own check runs before any GPU is known: a suggested recipe that runs on one
    GPU generation only says so ('mxfp8' was offered to a Hopper job as if it could run)."""
    with pytest.raises(SpecError, match=r"Transformer Engine >= 2\.2") as err:
        job(fp8_recipe="tensorwise", te_version="2.1")
    assert "use 'delayed' or 'mxfp8' (Blackwell GPUs only), which it has" in str(err.value)


@pytest.mark.parametrize("gpu", [H100, B200])
@pytest.mark.parametrize("te", ["1.14", "2.0", "2.1", "2.2", "2.3"])
@pytest.mark.parametrize("recipe", ["mxfp8", "blockwise"])
def test_every_suggested_recipe_runs_on_the_gpu_and_release(gpu: Any, te: str, recipe: str) -> None:
    from planner.fp8_recipes import recipe_gpu_problem

    try:
        j = job(fp8_recipe=recipe, te_version=te)
    except SpecError:
        return  # the release lacks it: the job's own check (the test above)
    problem = recipe_gpu_problem(recipe, gpu, j)
    if problem is None:
        return
    for suggested in re.findall(r"'(\w+)'", problem.split(": use ")[1]):
        fixed = replace(j, fp8_recipe=suggested)  # the release has it: no SpecError
        assert recipe_gpu_problem(suggested, gpu, fixed) is None, (suggested, problem)


@pytest.mark.parametrize(("gpu", "recipe"), [(H100, "blockwise"), (B200, "mxfp8"),
                                             (H100, "delayed"), (B200, "tensorwise")])  # fmt: skip
def test_a_recipe_on_its_gpu_breaks_no_rule(gpu: Any, recipe: str) -> None:
    j = job(fp8_recipe=recipe)
    check_settings(LLAMA_8B, cluster(gpu), j, {})
    assert not any("fp8_recipe" in v for v in violations(LLAMA_8B, cluster(gpu), j, LAYOUT))


# --- the planner's default ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "stack", "recipe"),
    [
        (H100, {}, "tensorwise"),
        (B200, {}, "mxfp8"),
        (H100, {"te_version": "2.1"}, "delayed"),  # current scaling: TE 2.2
        (H100, {"megatron_core_version": "0.11"}, "delayed"),  # --fp8-recipe: core 0.12
        (B200, {"te_version": "1.14"}, "delayed"),  # MXFP8: TE 2.0
        (B200, {"te_version": "2.0"}, "mxfp8"),
        (H100, {"megatron_core_version": "0.12", "te_version": "2.2"}, "tensorwise"),
        (replace(H100, architecture="ada"), {}, "delayed"),
    ],
)  # fmt: skip
def test_default_recipe_per_gpu_and_release(gpu: Any, stack: dict[str, str], recipe: str) -> None:
    j = job(**stack)
    assert j.fp8_recipe is None  # unset stays unset on the job; resolved with the GPU
    assert default_recipe(j, gpu) == recipe == effective_recipe(j, gpu)


def test_the_default_on_an_old_blackwell_stack_is_not_refused() -> None:
    # before, an fp8 job on Blackwell without MXFP8 in its release was refused outright
    j = job(megatron_core_version="0.11")
    check_settings(LLAMA_8B, cluster(B200), j, {})
    assert violations(LLAMA_8B, cluster(B200), j, LAYOUT) == []


def test_a_gpu_without_fp8_runs_no_recipe() -> None:
    assert effective_recipe(job(), A100) is None


# --- speed ------------------------------------------------------------------------------------


def _ctx(recipe: str | None, model: Any = LLAMA_8B) -> Any:
    batch = LayoutBatch.from_layouts([LAYOUT])
    return step_context(model, cluster(), job(fp8_recipe=recipe), batch, default_profile(H100))


@pytest.mark.parametrize("model", [LLAMA_8B, MIXTRAL_8X7B])
def test_blockwise_gemms_are_the_stated_factor_slower_than_per_tensor(model: Any) -> None:
    tensorwise, blockwise = _ctx("tensorwise", model), _ctx("blockwise", model)
    sh = tensorwise.shapes
    gemms = sh.attention_gemms + sh.dense_mlp_gemms
    per_tensor = gemms_time(tensorwise, gemms, tensorwise.tokens, tensorwise.tp)
    block = gemms_time(blockwise, gemms, blockwise.tokens, blockwise.tp)
    # performance-facts pitfall 6: "≈ 15 % slower than per-tensor"; a rate factor, not a fit
    assert BLOCKWISE_GEMM_RATE == 0.85
    np.testing.assert_allclose(block, per_tensor / BLOCKWISE_GEMM_RATE, rtol=1e-12)
    assert np.all(gemms_time(_ctx("delayed", model), gemms, block, tensorwise.tp) > 0)


def test_the_step_orders_recipes_by_their_stated_costs() -> None:
    batch = LayoutBatch.from_layouts([LAYOUT])

    def compute_s(recipe: str) -> float:
        est = estimate_performance(
            LLAMA_8B, cluster(), job(fp8_recipe=recipe), batch, default_profile(H100)
        )
        return float(est.breakdown["compute_s"][0])

    delayed, tensorwise, blockwise = (compute_s(r) for r in ("delayed", "tensorwise", "blockwise"))
    assert delayed < tensorwise < blockwise  # amax pass < 15 % of the GEMMs
    ctx = _ctx("delayed")
    sh = ctx.shapes
    gemm = float(gemms_time(ctx, sh.attention_gemms + sh.dense_mlp_gemms, ctx.tokens, ctx.tp)[0])
    # blockwise adds (1/0.85 - 1) of the layers' GEMMs, fwd + bwd (3x), per micro-batch
    m = float(ctx.microbatches[0])
    extra = m * LLAMA_8B.num_layers * 3 * gemm * (1 / BLOCKWISE_GEMM_RATE - 1)
    assert blockwise - delayed == pytest.approx(extra, rel=0.02)


def test_tensorwise_adds_the_amax_read_to_each_cast() -> None:
    tp, sp = np.array([2]), np.array([1.0])
    bf16 = elementwise_bytes_per_token(LLAMA_8B, tp, sp, False)[0][0]
    delayed = elementwise_bytes_per_token(LLAMA_8B, tp, sp, True, "delayed")[0][0]
    tensorwise = elementwise_bytes_per_token(LLAMA_8B, tp, sp, True, "tensorwise")[0][0]
    blockwise = elementwise_bytes_per_token(LLAMA_8B, tp, sp, True, "blockwise")[0][0]
    casts = delayed - bf16  # fitted: 6 B per quantized element; the amax read adds 2 B
    assert tensorwise - bf16 == pytest.approx(casts * 8 / 6)
    assert blockwise == delayed == elementwise_bytes_per_token(LLAMA_8B, tp, sp, True)[0][0]


def test_the_unset_recipe_is_priced_as_the_planner_resolves_it() -> None:
    assert _ctx(None).fp8_recipe == "tensorwise"
    assert _ctx("blockwise").fp8_recipe == "blockwise"


# --- memory -----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [LLAMA_8B, MIXTRAL_8X7B])
def test_block_recipes_add_their_scales_to_the_saved_fp8_copies(model: Any) -> None:
    batch = LayoutBatch.from_layouts([Layout(tp=2, dp=4, ep=2 if model.is_moe else 1)])

    def acts(j: TrainingJob, gpu: Any = H100) -> float:
        est = estimate_memory(model, cluster(gpu), j, batch)
        return float(est.first_stage_terms["activations_bytes"][0])

    delayed, tensorwise = acts(job(fp8_recipe="delayed")), acts(job(fp8_recipe="tensorwise"))
    blockwise, bf16 = acts(job(fp8_recipe="blockwise")), acts(job(precision="bf16"))
    mxfp8 = acts(job(fp8_recipe="mxfp8"), B200) - acts(job(fp8_recipe="tensorwise"), B200)
    assert delayed == tensorwise  # per-tensor: one 1-byte copy, no block scales
    assert delayed < blockwise < bf16
    # the same 3 % on Blackwell (MoE within 5 %: its own dispatcher and overlap defaults)
    assert mxfp8 == pytest.approx(blockwise - delayed, rel=1e-9 if not model.is_moe else 0.05)
    # 3 % of the fp8 copies: a small share of what fp8 saves, never more than the copies
    assert 0 < blockwise - delayed < BLOCK_SCALE_FRACTION * (bf16 - delayed) * 4


# --- read back from an argv and a log -------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "column", "note"),
    [({"fp8": "hybrid", "fp8_recipe": "tensorwise"}, "tensorwise", False),
     ({"fp8": "e4m3", "fp8_recipe": "Fp8Recipe.blockwise"}, "blockwise", False),
     ({"fp8": "hybrid"}, "delayed", True),  # before core 0.12: delayed only
     ({"fp8": "None", "fp8_recipe": "delayed"}, None, False)],  # a bf16 run: no recipe
)  # fmt: skip
def test_a_logs_arguments_give_the_recipe(args: dict[str, str], column: Any, note: bool) -> None:
    from planner.megatron.log_stack import stack_columns

    derived: list[str] = []
    out = stack_columns(args, derived)
    assert out.get("fp8_recipe") == column
    assert any("fp8_recipe=delayed" in d for d in derived) is note


def test_an_argv_gives_the_recipe_of_an_fp8_run_only() -> None:
    from planner.megatron.args import parse_megatron_args

    base = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "128", "--max-position-embeddings", "128",
            "--micro-batch-size", "1", "--global-batch-size", "8"]  # fmt: skip
    fp8 = parse_megatron_args(
        [*base, "--fp8-format", "hybrid", "--fp8-recipe", "mxfp8"], world_size=8
    )
    assert fp8.stack_fields["fp8_recipe"] == "mxfp8"
    assert (
        parse_megatron_args([*base, "--fp8-format", "hybrid"], world_size=8).stack_fields[
            "fp8_recipe"
        ]
        == "delayed"
    )  # Megatron's default
    assert "fp8_recipe" not in parse_megatron_args(base, world_size=8).stack_fields


def test_current_scaling_launches_an_amax_kernel_before_each_quantize() -> None:
    from planner.performance.host_overhead import (
        FP8_QUANTIZE_BWD,
        FP8_QUANTIZE_FWD,
        dense_layer_kernels,
        moe_layer_kernels,
    )

    tp, cp, e = np.array([2.0]), np.array([1.0]), np.array([8.0])
    delayed = dense_layer_kernels(tp=tp, cp=cp, fp8=True)
    current = dense_layer_kernels(tp=tp, cp=cp, fp8=True, amax=True)
    assert float((current.fwd - delayed.fwd)[0]) == FP8_QUANTIZE_FWD
    assert float((current.bwd - delayed.bwd)[0]) == FP8_QUANTIZE_BWD
    moe = moe_layer_kernels(tp=tp, cp=cp, local_experts=e, fp8=True)
    moe_current = moe_layer_kernels(tp=tp, cp=cp, local_experts=e, fp8=True, amax=True)
    # the attention half's, and one per expert per linear on TE's per-expert path
    assert float((moe_current.fwd - moe.fwd)[0]) == 2 + 2 * 8
    assert (
        dense_layer_kernels(tp=tp, cp=cp, amax=True).fwd[0]
        == dense_layer_kernels(tp=tp, cp=cp).fwd[0]
    )  # bf16: nothing to quantize


# --- what the plan says ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "stack", "words"),
    [
        (H100, {}, "fp8_recipe unset: the plan runs and is priced with tensorwise"),
        (B200, {}, "fp8_recipe unset: the plan runs and is priced with mxfp8"),
        # no --fp8-recipe flag says it on such a release: the note must
        (H100, {"megatron_core_version": "0.11"}, "priced with delayed (no --fp8-recipe"),
    ],
)  # fmt: skip
def test_an_unset_recipe_is_named_in_the_launch_notes(
    gpu: Any, stack: dict[str, str], words: str
) -> None:
    from planner.megatron.flags import launch_spec

    notes = launch_spec(LLAMA_8B, cluster(gpu), job(**stack), LAYOUT).notes
    assert any(words in n for n in notes), notes


@pytest.mark.parametrize("kw", [{"fp8_recipe": "delayed"}, {"precision": "bf16"}])
def test_a_named_recipe_or_bf16_adds_no_recipe_note(kw: dict[str, Any]) -> None:
    from planner.megatron.flags import launch_spec

    notes = launch_spec(LLAMA_8B, cluster(), job(**kw), LAYOUT).notes
    assert not any("fp8_recipe" in n for n in notes), notes
