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
from typing import Any, Literal

from pydantic import BaseModel, Field

from planner import Layout, TrainingJob
from planner.specs import CP_COMM_TYPES, CpCommType
from planner.stack_settings import (
    ATTENTION_BACKEND_CHOICES,
    CROSS_ENTROPY_FUSION_CHOICES,
    MOE_GROUPED_GEMM_KERNEL_CHOICES,
    AttentionBackend,
    CrossEntropyFusion,
    MoeGroupedGemmKernel,
)

Kind = Literal["bool", "choice", "number"]
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

    @property
    def default(self) -> Any:
        """The planner's recommended value: the dataclass's default, never a copy of it."""
        return _DEFAULTS[self.where][self.name]


_DEFAULTS = {
    "job": {f.name: f.default for f in dataclasses.fields(TrainingJob)},
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
        "bf16 also NVTE_USE_CUTLASS_GROUPED_GEMM=1, CUTLASS, TE >= 2.8); mechanisms-facts 4.1",
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
    """The pydantic field of a descriptor: default, bounds and help in the OpenAPI document."""
    spec = BY_NAME[name]
    lo, hi = spec.bounds or (None, None)
    return Field(default=spec.default, ge=lo, le=hi, description=spec.help)


class StackFields(BaseModel):
    """The job's software stack: one value each (the planner does not search them)."""

    tp_comm_overlap: bool = _field("tp_comm_overlap")
    attention_backend: AttentionBackend = _field("attention_backend")
    cross_entropy_fusion: CrossEntropyFusion = _field("cross_entropy_fusion")
    moe_imbalance: float = _field("moe_imbalance")
    moe_grouped_gemm_kernel: MoeGroupedGemmKernel = _field("moe_grouped_gemm_kernel")
    expandable_segments: bool = _field("expandable_segments")
    cp_comm_type: CpCommType | None = _field("cp_comm_type")


def job_stack(req: BaseModel) -> dict[str, Any]:
    """The job's stack fields of a request, as ``TrainingJob`` keyword arguments."""
    return {f.name: getattr(req, f.name) for f in STACK_FIELDS if f.where == "job"}


def layout_stack(req: BaseModel) -> dict[str, Any]:
    """The layout's stack fields of an evaluation request, as ``Layout`` keyword arguments."""
    return {f.name: getattr(req, f.name) for f in STACK_FIELDS if f.where == "layout"}
