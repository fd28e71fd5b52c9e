"""The software-stack fields of the typed requests (issue 12 item 1), one descriptor per field.

The stack is an input: each setting is a field of :class:`planner.TrainingJob` with the planner's
recommended default (``planner.stack_settings``). Every interface reads this one list: the API
schemas (``StackFields``), the CLI flags (``app.cli.options``), ``--input`` keys and batch CSV
columns (the same request fields), the web form (``app.web.stack_form``) and the SDK (the typed
requests). One more field is one descriptor here plus one annotated line in ``StackFields``.
The layout's stack choices (``cuda_graphs``, ``moe_dispatcher``, ``moe_a2a_overlap``) are
request fields already (``memory_fields``, ``schemas``) and keep their place there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationInfo

from app.core.schemas import RequestModel
from planner import Layout
from planner.fp8_recipes import FP8_RECIPE_CHOICES, Fp8Recipe
from planner.specs import CP_COMM_TYPES, CpCommType, SpecError
from planner.stack_defaults import (
    RELEASE_FALLBACKS,
    floored_defaults,
    job_defaults,
    release_defaults,
)
from planner.stack_settings import (
    ATTENTION_BACKEND_CHOICES,
    CROSS_ENTROPY_FUSION_CHOICES,
    MOE_GROUPED_GEMM_KERNEL_CHOICES,
    AttentionBackend,
    CrossEntropyFusion,
    MoeGroupedGemmKernel,
)
from planner.stack_versions import (
    CORE_VERSIONS,
    NEMO_CONTAINERS,
    NEWEST_CORE,
    NEWEST_TE,
    TE_VERSIONS,
    parse_version,
)

Kind = Literal["bool", "choice", "number"]


def _version(value: str, info: ValidationInfo) -> str:
    """A release as written ("0.12", "v0.12.0") or a NeMo container tag; a ValueError naming
    the accepted range otherwise (pydantic turns it into a 422 on the field)."""
    if value.strip() in NEMO_CONTAINERS:
        return value.strip()
    try:
        parse_version(str(info.field_name), value)
    except SpecError as exc:
        raise ValueError(exc.message) from None
    return value.strip()


Version = Annotated[str, AfterValidator(_version)]
Where = Literal["job", "layout"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StackField:
    """One software-stack setting as every interface shows it."""

    name: str
    """The request field, the ``--input`` key and the batch column (the CLI flag hyphenated)."""
    kind: Kind
    label: str
    """What the web form calls it."""
    help: str
    """What it does and the Megatron-LM flag it sets."""
    flag: str
    """The Megatron-LM flag, for the form's short hint."""
    choices: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None
    """Inclusive range of a number (the planner's own check, ``check_stack``)."""
    where: Where = "job"
    """The planner type that holds it: ``TrainingJob``, or ``Layout`` (None = planner's choice)."""
    unset: str = "planner's choice"
    """What leaving it unset (None) means, for the form's first option and the CLI's help."""

    @property
    def default(self) -> Any:
        """The planner's recommended value: the dataclass's default, never a copy of it."""
        return _DEFAULTS[self.where][self.name]


_DEFAULTS = {
    "job": job_defaults(),  # recommended values, also of the fields unstated (None) by default
    "layout": {f.name: f.default for f in dataclasses.fields(Layout)},
}

STACK_FIELDS: tuple[StackField, ...] = (
    StackField(
        name="tp_comm_overlap",
        kind="bool",
        label="TP communication overlap",
        flag="--tp-comm-overlap",
        help="--tp-comm-overlap: TE userbuffers hide the TP all-gather/reduce-scatter behind the "
        "GEMMs (tp > 1 with sequence parallel, Hopper or newer); false = fully exposed",
    ),
    StackField(
        name="attention_backend",
        kind="choice",
        choices=ATTENTION_BACKEND_CHOICES,
        label="Attention backend",
        flag="--attention-backend",
        help="--attention-backend: auto (TE picks flash or cuDNN fused), flash, fused, or unfused "
        "(the pre-flash softmax path)",
    ),
    StackField(
        name="cross_entropy_fusion",
        kind="choice",
        choices=CROSS_ENTROPY_FUSION_CHOICES,
        label="Cross-entropy fusion",
        flag="--cross-entropy-loss-fusion",
        help="native = --cross-entropy-loss-fusion; te / te_fp32_grad = with "
        "--cross-entropy-fusion-impl te; unfused = neither flag",
    ),
    StackField(
        name="moe_imbalance",
        kind="number",
        bounds=(1.0, 8.0),
        label="MoE load imbalance",
        flag="1.0 = --moe-router-force-load-balancing",
        help="busiest expert's tokens over the mean: 1.0 = --moe-router-force-load-balancing (as "
        "in NVIDIA's benchmarks); 1.2 = an auxiliary-loss run (performance-facts 5.3)",
    ),
    StackField(
        name="moe_grouped_gemm_kernel",
        kind="choice",
        choices=MOE_GROUPED_GEMM_KERNEL_CHOICES,
        label="MoE expert GEMM kernel",
        flag="NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM",
        help="multi_stream = TE's default GroupedLinear path (a cuBLAS GEMM per local expert on "
        "4 streams); grouped = one grouped kernel for all experts (environment "
        "NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM=1, cuBLASLt, TE >= 2.13; on Hopper with "
        "bf16 also NVTE_USE_CUTLASS_GROUPED_GEMM=1, CUTLASS, TE >= 2.8; NVIDIA only); unset = "
        "the planner's choice: grouped where the GPU, precision and TE have it and it is "
        "faster, else multi_stream (evaluations: multi_stream); mechanisms-facts 4.1",
    ),
    StackField(
        name="fp8_recipe",
        kind="choice",
        choices=FP8_RECIPE_CHOICES,
        label="FP8 recipe",
        flag="--fp8-recipe",
        unset="planner's choice (fp8 only)",
        help="--fp8-recipe of an fp8 job (core >= 0.12; before, delayed only): delayed (amax "
        "history, Megatron's default), tensorwise (current scaling, TE >= 2.2: one more amax "
        "pass per cast), blockwise (Hopper, TE >= 2.3: GEMMs 15 % slower, performance-facts "
        "pitfall 6), mxfp8 (Blackwell, TE >= 2.0); blockwise and mxfp8 keep 3 % scales on the "
        "saved fp8 activations; unset = the planner's choice: mxfp8 on Blackwell, tensorwise on "
        "Hopper where the release has them, else delayed; only with precision fp8",
    ),
    StackField(
        name="megatron_core_version",
        kind="choice",
        choices=(*reversed(CORE_VERSIONS), *NEMO_CONTAINERS),
        label="Megatron-Core version",
        flag="which flags exist",
        unset=f"newest ({NEWEST_CORE})",
        help=f"the Megatron-Core release the run uses ({CORE_VERSIONS[0]} to {NEWEST_CORE}, e.g. "
        "0.12; a NeMo container tag 24.05/24.07/24.09 stands for its core and TE): settings it "
        "lacks are refused with the minimum version, and the flags are spelled for it "
        "(--cuda-graph-scope before 0.18, --moe-enable-deepep before 0.16); unset = the newest "
        f"the facts cover ({NEWEST_CORE}); mechanisms-facts 8",
    ),
    StackField(
        name="te_version",
        kind="choice",
        choices=tuple(reversed(TE_VERSIONS)),
        label="Transformer Engine version",
        flag="which kernels exist",
        unset=f"newest ({NEWEST_TE})",
        help="the Transformer Engine release (1.0 to 1.14, 2.0 to 2.18, e.g. 2.5): decides the CP "
        "types (all_gather 1.10, a2a 1.11, a2a+p2p 1.12), the grouped expert GEMM (2.8 CUTLASS "
        f"on Hopper, 2.13 cuBLASLt) and fp8 recipes; unset = the newest covered ({NEWEST_TE}); "
        "mechanisms-facts 8",
    ),
    StackField(
        name="expandable_segments",
        kind="bool",
        label="Expandable allocator segments",
        flag="PYTORCH_CUDA_ALLOC_CONF",
        help="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the launch script: the "
        "allocator grows segments in place, so fragmentation shrinks from about 10 % to 2 % of "
        "the per-step memory (mechanisms-facts 6.7); false = PyTorch's default",
    ),
    StackField(
        name="cp_comm_type",
        kind="choice",
        choices=CP_COMM_TYPES,
        where="layout",
        label="CP communication",
        flag="--cp-comm-type",
        help="--cp-comm-type of a cp > 1 layout: p2p ring (Megatron's default), all_gather of "
        "K/V, a2a (Ulysses: cp must divide the heads per TP rank) or a2a+p2p (all-to-all in a "
        "node, ring across nodes); unset = the planner tries every valid one",
    ),
)
BY_NAME = {f.name: f for f in STACK_FIELDS}
STACK_FIELD_NAMES = tuple(BY_NAME)


def _field(name: str) -> Any:
    """The pydantic field of a descriptor: default, bounds and help in the OpenAPI document.
    A default some release lacks is None in the request (not stated: the planner's default, or
    the value every release has where the job's lacks it; ``planner.stack_defaults``)."""
    spec = BY_NAME[name]
    lo, hi = spec.bounds or (None, None)
    if name in floored_defaults():
        text = f"{spec.help}; unset = {spec.default!r}, or {RELEASE_FALLBACKS[name]!r} where "
        text += "the job's Megatron-Core / TE lacks it"
        return Field(default=None, ge=lo, le=hi, description=text)
    return Field(default=spec.default, ge=lo, le=hi, description=spec.help)


class StackFields(RequestModel):
    """The job's software stack and its releases: one value each (None: the planner's choice, or
    for a release the newest covered)."""

    tp_comm_overlap: bool | None = _field("tp_comm_overlap")
    attention_backend: AttentionBackend = _field("attention_backend")
    cross_entropy_fusion: CrossEntropyFusion | None = _field("cross_entropy_fusion")
    moe_imbalance: float = _field("moe_imbalance")
    moe_grouped_gemm_kernel: MoeGroupedGemmKernel | None = _field("moe_grouped_gemm_kernel")
    fp8_recipe: Fp8Recipe | None = _field("fp8_recipe")
    megatron_core_version: Version | None = _field("megatron_core_version")
    te_version: Version | None = _field("te_version")
    expandable_segments: bool = _field("expandable_segments")
    cp_comm_type: CpCommType | None = _field("cp_comm_type")


def job_stack(req: BaseModel) -> dict[str, Any]:
    """The job's stack fields of a request, as ``TrainingJob`` keyword arguments (the unstated
    ones at the defaults the job's release has)."""
    return release_defaults(
        {f.name: getattr(req, f.name) for f in STACK_FIELDS if f.where == "job"}
    )


def layout_stack(req: BaseModel) -> dict[str, Any]:
    """The layout's stack fields of an evaluation request, as ``Layout`` keyword arguments."""
    return {f.name: getattr(req, f.name) for f in STACK_FIELDS if f.where == "layout"}
