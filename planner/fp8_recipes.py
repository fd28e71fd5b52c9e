"""The fp8 recipe of a job (``--fp8-recipe``): the values, the checks and the planner's default.

Issue 12 item 1 ("every software setting that changes speed or memory is an explicit field"):
``TrainingJob.fp8_recipe`` names how Transformer Engine scales fp8 tensors. Megatron offers
``--fp8-recipe {tensorwise,delayed,mxfp8,blockwise,custom}``, default ``delayed``, ``mxfp8``
Blackwell-only (megatron-facts §1.8). The flag exists from Megatron-Core 0.12 (before it, delayed
scaling only); TE has MXFP8 from 2.0, current ("tensorwise") scaling from 2.2 and blockwise from
2.3 (mechanisms-facts §8; rows of ``planner/data/stack_features.csv``). ``custom`` (a user's
Python recipe class) is not offered: nothing says what it costs, and CP rejects it
(mechanisms-facts §1). NVFP4 (TE 2.8, ``--fp4-recipe``) is a different precision, not an fp8
recipe, and the sheets give no rate to price it: not offered either.

None (the default) is the planner's recommendation, resolved per GPU and release by
:func:`default_recipe`: MXFP8 on Blackwell, current scaling on Hopper, delayed scaling where the
release has nothing newer. Why not delayed everywhere (Megatron's default)? Delayed scaling takes
each tensor's scale from an amax history of earlier steps, so a tensor whose range jumps
overflows until the history catches up; the newer recipes scale from the tensor itself. They are
also the only ones TE's grouped expert GEMM (mechanisms-facts §4.1: "not delayed scaling") and
``--first-last-layers-bf16`` (megatron-facts rule 55) accept. Current scaling costs one amax
pass more per quantized tensor (priced: :mod:`planner.performance.fp8_recipe_cost`); MXFP8 is
the only recipe Megatron documents for Blackwell. Blockwise is Hopper's DeepSeek-V3 recipe,
about 15 % slower in the GEMMs than per-tensor (performance-facts pitfall 6): run only where
the job names it (never the default), its GEMMs priced at that stated factor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from planner.specs import BLACKWELL_OR_NEWER, SpecError
from planner.stack_versions import missing, require

if TYPE_CHECKING:
    from planner.specs import GPUSpec, TrainingJob

__all__ = [
    "FP8_RECIPE_CHOICES",
    "Fp8Recipe",
    "check_recipe",
    "default_recipe",
    "effective_recipe",
    "recipe_gpu_problem",
    "unset_recipe_note",
    "usable_recipes",
]

Fp8Recipe = Literal["delayed", "tensorwise", "blockwise", "mxfp8"]
FP8_RECIPE_CHOICES: tuple[Fp8Recipe, ...] = ("delayed", "tensorwise", "blockwise", "mxfp8")
BLACKWELL = BLACKWELL_OR_NEWER
"""mxfp8's GPUs (megatron-facts §1.8: "Blackwell-only"; Rubin is Blackwell's successor)."""
HOPPER = frozenset({"hopper"})
"""blockwise's GPUs (mechanisms-facts §4.1, §6.1: "blockwise (Hopper only)")."""
_WHERE = {"mxfp8": (BLACKWELL, "Blackwell"), "blockwise": (HOPPER, "Hopper")}
_UNOFFERED = {
    "custom": "a custom recipe is user Python code the planner cannot price; CP rejects it "
    "too, mechanisms-facts §1",
    "nvfp4": "NVFP4 is Megatron's --fp4-recipe, a 4-bit precision the planner does not price",
}


def check_recipe(job: TrainingJob) -> None:
    """The job-only checks of ``fp8_recipe`` (value, precision, release); SpecError naming the
    field and the fix. The GPU's are :func:`recipe_gpu_problem`'s."""
    recipe = job.fp8_recipe
    if recipe is None:
        return
    if recipe not in FP8_RECIPE_CHOICES:
        why = _UNOFFERED.get(str(recipe).strip().lower())
        raise SpecError(
            f"fp8_recipe={recipe!r} is not supported"
            + (f" ({why})" if why else "")
            + f"; use {', '.join(FP8_RECIPE_CHOICES)}, or leave it unset for the planner's "
            "choice (mxfp8 on Blackwell, tensorwise on Hopper where the release has them)",
            field="fp8_recipe",
        )
    if job.precision != "fp8":
        raise SpecError(
            f"fp8_recipe={recipe!r} applies to fp8 training only, and precision="
            f"{job.precision!r}: set precision='fp8', or remove fp8_recipe",
            field="fp8_recipe",
        )
    # the GPU is not known yet: a recipe that runs on one generation only says which
    others = _choices(usable_recipes(job, None, but=recipe), None)
    require(job, "fp8_recipe", recipe,
            fix=f"use {others}, which it has, or leave fp8_recipe unset for the planner's "
            "choice")  # fmt: skip


def usable_recipes(job: TrainingJob, gpu: GPUSpec | None, *, but: str | None = None) -> list[str]:
    """The recipes the job's release has and ``gpu`` runs (None: any GPU's), other than
    ``but``: the planner's choice for that GPU first (:func:`default_recipe`), then the table's
    order. What every refusal of a recipe suggests, so none suggests one that cannot run."""
    first = [default_recipe(job, gpu)] if gpu is not None else []
    return [
        r
        for r in dict.fromkeys([*first, *FP8_RECIPE_CHOICES])
        if r != but
        and missing(job, "fp8_recipe", r) is None
        and (gpu is None or r not in _WHERE or gpu.architecture in _WHERE[r][0])
    ]


def _choices(recipes: list[str], gpu: GPUSpec | None) -> str:
    """``'tensorwise' or 'delayed'``; with no GPU known, a one-generation recipe says which."""
    shown = [
        repr(r) + (f" ({_WHERE[r][1]} GPUs only)" if gpu is None and r in _WHERE else "")
        for r in recipes
    ]
    return " or ".join(shown) or "no other recipe"


def recipe_gpu_problem(recipe: str | None, gpu: GPUSpec, job: TrainingJob) -> str | None:
    """Why ``recipe`` cannot run on ``gpu`` (None: it can, or no recipe is named); the recipes
    it suggests instead are those the GPU runs and the job's release has."""
    if recipe not in _WHERE:
        return None
    archs, name = _WHERE[recipe]
    if gpu.architecture in archs:
        return None
    others = _choices(usable_recipes(job, gpu, but=recipe), gpu)
    return (
        f"fp8_recipe={recipe!r} runs on {name} GPUs only (megatron-facts §1.8, mechanisms-facts "
        f"§4.1/§6.1) and {gpu.name} is {gpu.architecture}: use fp8_recipe={others}, or leave "
        "it unset for the planner's choice"
    )


def default_recipe(job: TrainingJob, gpu: GPUSpec) -> Fp8Recipe:
    """The planner's recipe for an fp8 job that names none (the module docstring says why):
    mxfp8 on Blackwell, tensorwise on Hopper, each where the job's release has it; else
    delayed, which every release with fp8 has."""
    if gpu.architecture in BLACKWELL and missing(job, "fp8_recipe", "mxfp8") is None:
        return "mxfp8"
    if gpu.architecture in HOPPER and missing(job, "fp8_recipe", "tensorwise") is None:
        return "tensorwise"
    return "delayed"


def effective_recipe(job: TrainingJob, gpu: GPUSpec) -> Fp8Recipe | None:
    """The recipe the job runs on ``gpu``: its own, else :func:`default_recipe`; None for a
    job that does not train in fp8 (or a GPU without fp8 tensor cores)."""
    if job.precision != "fp8" or gpu.peak_fp8_flop_per_s is None:
        return None
    return job.fp8_recipe or default_recipe(job, gpu)


def unset_recipe_note(job: TrainingJob, gpu: GPUSpec, *, flagged: bool) -> str | None:
    """For the plan's launch notes: the recipe an fp8 job that names none runs and is priced
    with (None where the job names one, or trains without fp8). ``flagged``: the argv carries
    ``--fp8-recipe`` (core >= 0.12); before, no flag shows which recipe runs."""
    recipe = effective_recipe(job, gpu)
    if job.fp8_recipe is not None or recipe is None:
        return None
    flag = (
        f"--fp8-recipe {recipe}"
        if flagged
        else "no --fp8-recipe flag before Megatron-Core 0.12: delayed scaling is its only recipe"
    )
    return (
        f"fp8_recipe unset: the plan runs and is priced with {recipe} ({flag}); the planner's "
        "choice is mxfp8 on Blackwell, tensorwise on Hopper where the release has them, else "
        "delayed: set fp8_recipe to price another"
    )
