"""Memory settings in the search (issue 13): fixed inputs, and the axes the search may vary.

:class:`MemoryChoices` is what a user fixes or allows for the memory settings of every candidate.
Settings with no accuracy cost (recompute modules, offload, CUDA graphs, fp8 parameter gather, a
pipeline layout) are fixed inputs or, for ``optimizer_offload_fraction``, a tuple the search
tries; ``cuda_graphs`` left None is chosen by the search (``planner.search.stack_choice``).
The numerics-changing ones (bf16 gradient reduction, bf16 Adam moments) are searched only with
``allow_numerics_changes``; otherwise they stay at what the user fixed (fp32 by default).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

import numpy as np

from planner.layout_settings import FP8_GATHER_AUTO, SettingsColumns, modules_mask
from planner.layout_types import (
    CUDA_GRAPHS_CHOICES,
    GRAD_REDUCE_DTYPE_CHOICES,
    OPTIMIZER_STATE_DTYPE_CHOICES,
    CudaGraphs,
    GradReduceDtype,
    OffloadModule,
    OptimizerStateDtype,
    RecomputeModule,
)
from planner.layouts import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, LayoutBatch
from planner.model.pipeline import split_layers
from planner.model.pipeline_layout import balanced_layout, parse_pipeline_layout
from planner.offload_modules import check_offload_modules, offload_mask, recommended_offload_modules
from planner.specs import Layout, ModelSpec, SpecError

__all__ = [
    "MemoryChoices",
    "apply_memory_choices",
    "attach_balanced_layouts",
    "recommended_module_sets",
]


def recommended_module_sets(model: ModelSpec) -> list[tuple[RecomputeModule, ...] | None]:
    """Selective-recompute module sets of NVIDIA's recipes that apply to the model
    (mechanisms-facts §6.4: DeepSeek-V3 mla_up_proj + mlp + moe_act + layernorm; MoE recipes
    moe_act, layernorm; dense SFT mlp), Megatron's default first."""
    sets: list[tuple[RecomputeModule, ...] | None] = [None, ("core_attn", "mlp")]
    if model.is_moe:
        sets += [("moe_act",), ("layernorm", "moe_act"), ("moe",)]
    if model.multi_latent_attention:
        sets.append(("mlp", "moe_act", "layernorm", "mla_up_proj") if model.is_moe
                    else ("mlp", "layernorm", "mla_up_proj"))  # fmt: skip
    return sets


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryChoices:
    """Memory settings of the candidates (each field as on :class:`planner.specs.Layout`)."""

    grad_reduce_dtype: tuple[GradReduceDtype, ...] | None = None
    """Allowed values; None means ('fp32',), or both with allow_numerics_changes."""
    optimizer_state_dtype: tuple[OptimizerStateDtype, ...] | None = None
    """Allowed values; None means ('fp32',), or both with allow_numerics_changes."""
    allow_numerics_changes: bool = False
    """Let the search choose bf16 gradient reduction and bf16 Adam moments (they change the
    training numerics; NVIDIA's DeepSeek-V3 recipe uses both)."""
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    """Modules of every selective candidate; None is Megatron's default ('core_attn',)."""
    search_recompute_modules: bool = False
    """Also try the module sets NVIDIA's recipes use (:func:`recommended_module_sets`) for the
    selective candidates; they cost replay time, never accuracy."""
    recompute_num_layers: int | None = None
    """Layers per chunk of every full-recompute candidate (block method); None: all."""
    cuda_graphs: CudaGraphs | None = None
    """Every candidate's mode, or None: the search chooses it for its best candidates
    (``planner.search.stack_choice``; candidates are screened with 'none')."""
    activation_offload_layers: int = 0
    optimizer_offload_fraction: tuple[float, ...] = (0.0,)
    """Values the search tries (0 keeps the optimizer on the GPU)."""
    fp8_param_gather: bool | None = None
    pipeline_layout: str | None = None
    """A fixed ``--pipeline-model-parallel-layout``; pp must then be fixed, vpp follows."""
    auto_pipeline_layout: bool = False
    """Where Megatron's even, account-for and uneven splits cannot serve a (pp, vpp) pair,
    give its candidates a balanced explicit layout (:func:`planner.model.pipeline_layout.
    balanced_layout`), so that e.g. DeepSeek-V3 can interleave as NVIDIA's recipes do. Opt-in:
    it multiplies such a model's space (DeepSeek-V3 on 1024 GPUs: 0.2 M -> 1.4 M layouts) and
    every rank of a layout is charged, so the search takes tens of seconds instead of 0.1 s."""
    activation_offload_modules: tuple[OffloadModule, ...] | None = None
    """``--offload-modules`` of every candidate (None: off), or with search_activation_offload
    the set the search may add."""
    search_activation_offload: bool = False
    """Let the search choose between no fine-grained activation offload and the modules above
    (or, when none are given, every module the model has: planner.offload_modules.
    recommended_offload_modules). Off by default: offload needs host memory and costs link time."""

    def __post_init__(self) -> None:
        for name, choices in (
            ("grad_reduce_dtype", GRAD_REDUCE_DTYPE_CHOICES),
            ("optimizer_state_dtype", OPTIMIZER_STATE_DTYPE_CHOICES),
        ):
            values = getattr(self, name)
            if values is not None and (not values or any(v not in choices for v in values)):
                raise SpecError(
                    f"{name}={values!r}: allowed values are {', '.join(choices)}", field=name
                )
        if self.cuda_graphs is not None and self.cuda_graphs not in CUDA_GRAPHS_CHOICES:
            raise SpecError(
                f"cuda_graphs={self.cuda_graphs!r} is not one of {', '.join(CUDA_GRAPHS_CHOICES)}",
                field="cuda_graphs",
            )
        if not self.optimizer_offload_fraction:
            raise SpecError(
                "optimizer_offload_fraction=() allows nothing; use (0.0,)",
                field="optimizer_offload_fraction",
            )
        # the Layout validates each value with its own messages
        for fraction in self.optimizer_offload_fraction:
            Layout(optimizer_offload_fraction=fraction)
        Layout(activation_offload_layers=self.activation_offload_layers)
        object.__setattr__(
            self,
            "activation_offload_modules",
            check_offload_modules(self.activation_offload_modules),
        )
        Layout(recompute="selective", recompute_modules=self.recompute_modules)
        Layout(recompute="full", recompute_num_layers=self.recompute_num_layers)
        if self.pipeline_layout is not None:
            parse_pipeline_layout(self.pipeline_layout)

    def offload_sets(self, model: ModelSpec) -> list[tuple[OffloadModule, ...] | None]:
        """The ``--offload-modules`` sets the search tries."""
        if not self.search_activation_offload:
            return [self.activation_offload_modules]
        return [None, self.activation_offload_modules or recommended_offload_modules(model)]

    def dtypes(self) -> list[tuple[str, str]]:
        """(grad_reduce_dtype, optimizer_state_dtype) pairs the search tries."""
        both = self.allow_numerics_changes
        grads = self.grad_reduce_dtype or (("fp32", "bf16") if both else ("fp32",))
        states = self.optimizer_state_dtype or (("fp32", "bf16") if both else ("fp32",))
        return list(product(grads, states))

    def layout_vpp(self, pp: int) -> int | None:
        """vpp a fixed pipeline layout implies on pp ranks; None without a layout or when the
        layout's stage count is not a multiple of pp."""
        if self.pipeline_layout is None:
            return None
        stages = parse_pipeline_layout(self.pipeline_layout).num_stages
        return stages // pp if stages % pp == 0 else None


def apply_memory_choices(
    model: ModelSpec, batch: LayoutBatch, choices: MemoryChoices
) -> LayoutBatch:
    """The batch with the fixed settings attached, once per searched combination."""
    sets = [choices.recompute_modules]
    if choices.search_recompute_modules:
        sets += [m for m in recommended_module_sets(model) if m != choices.recompute_modules]
    selective = batch.recompute == RECOMPUTE_SELECTIVE
    offload = [offload_mask(m) for m in choices.offload_sets(model)]
    parts = [_with_settings(batch, choices, sets[0], offload)]
    for modules in sets[1:]:  # the other sets only for the selective candidates
        chosen = batch.take(np.flatnonzero(selective))
        parts.append(_with_settings(chosen, choices, modules, offload))
    return parts[0] if len(parts) == 1 else LayoutBatch.concat(parts)


def _with_settings(
    batch: LayoutBatch,
    choices: MemoryChoices,
    modules: tuple[RecomputeModule, ...] | None,
    offload_masks: list[int],
) -> LayoutBatch:
    n = len(batch)
    selective = batch.recompute == RECOMPUTE_SELECTIVE
    full = batch.recompute == RECOMPUTE_FULL
    parts = []
    combos = product(choices.dtypes(), choices.optimizer_offload_fraction, offload_masks)
    for (grad, state), fraction, offload in combos:
        settings = SettingsColumns.from_values(
            n,
            grad_reduce_bf16=grad == "bf16",
            optimizer_state_bf16=state == "bf16",
            fp8_param_gather=FP8_GATHER_AUTO
            if choices.fp8_param_gather is None
            else int(choices.fp8_param_gather),
            recompute_modules=np.where(selective, modules_mask(modules), 0),
            recompute_num_layers=np.where(full, choices.recompute_num_layers or 0, 0),
            cuda_graphs=CUDA_GRAPHS_CHOICES.index(choices.cuda_graphs or "none"),
            activation_offload_layers=choices.activation_offload_layers,
            optimizer_offload_fraction=fraction,
            pipeline_layout=choices.pipeline_layout or "",
            activation_offload_modules=offload,
        )
        parts.append(replace(batch, settings=settings))
    return parts[0] if len(parts) == 1 else LayoutBatch.concat(parts)


def attach_balanced_layouts(model: ModelSpec, batch: LayoutBatch) -> LayoutBatch:
    """Give every candidate whose (pp, vpp) has no standard split a balanced layout string."""
    layouts: dict[tuple[int, int], str] = {}
    for pp, vpp in set(zip(batch.pp.tolist(), batch.vpp.tolist(), strict=True)):
        if vpp > 1 and split_layers(model.num_layers, pp, vpp) is None:
            text = balanced_layout(model.num_layers, model.mtp_num_layers, pp, vpp)
            if text is not None:
                layouts[(pp, vpp)] = text
    if not layouts:
        return batch
    mem = batch.mem
    column = mem.pipeline_layout.copy()
    has = mem.has_layout.copy()
    for (pp, vpp), text in layouts.items():
        rows = (batch.pp == pp) & (batch.vpp == vpp) & ~mem.has_layout
        column[rows] = text
        has |= rows
    return replace(batch, settings=replace(mem, pipeline_layout=column, has_layout=has))
