"""The memory settings of many layouts as arrays (issue 13), carried by :class:`LayoutBatch`.

One array per :class:`planner.specs.Layout` memory field, so that memory, time and rules stay
vectorised. A batch without settings (``LayoutBatch.settings is None``) means every layout at its
defaults, which is what the estimates were before these fields existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from planner.layout_types import (
    CUDA_GRAPHS_CHOICES,
    RECOMPUTE_MODULE_CHOICES,
    CudaGraphs,
    RecomputeModule,
)
from planner.offload_modules import offload_mask, offload_modules_of
from planner.specs import Layout

if TYPE_CHECKING:
    from planner.layouts import LayoutBatch

__all__ = [
    "GRAPHS_FULL",
    "GRAPHS_NONE",
    "GRAPHS_PARTIAL",
    "MODULE_BITS",
    "SettingsColumns",
    "effective_modules",
    "full_recompute_share",
    "modules_mask",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
StrArray = npt.NDArray[np.object_]

GRAPHS_NONE, GRAPHS_PARTIAL, GRAPHS_FULL = 0, 1, 2
FP8_GATHER_AUTO, FP8_GATHER_OFF, FP8_GATHER_ON = -1, 0, 1
MODULE_BITS: dict[str, int] = {m: 1 << i for i, m in enumerate(RECOMPUTE_MODULE_CHOICES)}
"""Bit of each ``--recompute-modules`` value in :attr:`SettingsColumns.recompute_modules`."""


def modules_mask(modules: Sequence[str] | None) -> int:
    total = 0
    for m in modules or ():
        total |= MODULE_BITS[m]
    return total


def _modules(mask: int) -> tuple[RecomputeModule, ...] | None:
    found = tuple(m for m in RECOMPUTE_MODULE_CHOICES if mask & MODULE_BITS[m])
    return found or None


@dataclass(frozen=True, slots=True)
class SettingsColumns:
    """Memory settings of n layouts (field i of every array describes layout i)."""

    grad_reduce_bf16: BoolArray
    optimizer_state_bf16: BoolArray
    fp8_param_gather: IntArray
    """FP8_GATHER_AUTO / _OFF / _ON."""
    recompute_modules: IntArray
    """Bit mask over MODULE_BITS (0 where recompute is not selective)."""
    recompute_num_layers: IntArray
    """0 means every layer (full recompute) or not applicable."""
    cuda_graphs: IntArray
    activation_offload_layers: IntArray
    optimizer_offload_fraction: FloatArray
    pipeline_layout: StrArray
    """The layout string, '' where none is given."""
    has_layout: BoolArray
    """pipeline_layout != '' (kept as a column: comparing strings per call is slow)."""
    activation_offload_modules: IntArray
    """Bit mask over planner.offload_modules.OFFLOAD_BITS (0: fine-grained offload off)."""

    def __len__(self) -> int:
        return int(self.grad_reduce_bf16.shape[0])

    @classmethod
    def defaults(cls, n: int) -> SettingsColumns:
        """n rows at the defaults (shared, read-only arrays: a batch without settings asks for
        them in every model, so they are built once per length)."""
        return _defaults(n)

    @classmethod
    def from_values(cls, n: int, **values: Any) -> SettingsColumns:
        """n rows with the given scalar (or length-n) values, the defaults elsewhere."""

        def col(name: str, default: Any, dtype: Any) -> Any:
            return np.broadcast_to(np.asarray(values.get(name, default), dtype=dtype), (n,)).copy()

        layout = np.empty(n, dtype=object)
        layout[:] = values.get("pipeline_layout", "") or ""
        return cls(
            has_layout=np.asarray(layout != "", dtype=np.bool_).reshape(n),
            grad_reduce_bf16=col("grad_reduce_bf16", False, np.bool_),
            optimizer_state_bf16=col("optimizer_state_bf16", False, np.bool_),
            fp8_param_gather=col("fp8_param_gather", FP8_GATHER_AUTO, np.int64),
            recompute_modules=col("recompute_modules", 0, np.int64),
            recompute_num_layers=col("recompute_num_layers", 0, np.int64),
            cuda_graphs=col("cuda_graphs", GRAPHS_NONE, np.int64),
            activation_offload_layers=col("activation_offload_layers", 0, np.int64),
            optimizer_offload_fraction=col("optimizer_offload_fraction", 0.0, np.float64),
            pipeline_layout=layout,
            activation_offload_modules=col("activation_offload_modules", 0, np.int64),
        )

    @classmethod
    def from_layouts(cls, items: Sequence[Layout]) -> SettingsColumns:
        """Columns of normalised layouts (:meth:`Layout.normalized`)."""
        n = len(items)

        def col(get: Any, dtype: Any) -> Any:
            return np.fromiter((get(x) for x in items), dtype=dtype, count=n)

        layout = np.empty(n, dtype=object)
        layout[:] = [x.pipeline_layout or "" for x in items]
        return cls(
            has_layout=np.fromiter((bool(x.pipeline_layout) for x in items), np.bool_, n),
            grad_reduce_bf16=col(lambda x: x.grad_reduce_dtype == "bf16", np.bool_),
            optimizer_state_bf16=col(lambda x: x.optimizer_state_dtype == "bf16", np.bool_),
            fp8_param_gather=col(
                lambda x: (
                    FP8_GATHER_AUTO if x.fp8_param_gather is None else int(x.fp8_param_gather)
                ),
                np.int64,
            ),
            recompute_modules=col(lambda x: modules_mask(x.recompute_modules), np.int64),
            recompute_num_layers=col(lambda x: x.recompute_num_layers or 0, np.int64),
            cuda_graphs=col(lambda x: CUDA_GRAPHS_CHOICES.index(x.cuda_graphs), np.int64),
            activation_offload_layers=col(lambda x: x.activation_offload_layers, np.int64),
            optimizer_offload_fraction=col(lambda x: x.optimizer_offload_fraction, np.float64),
            pipeline_layout=layout,
            activation_offload_modules=col(
                lambda x: offload_mask(x.activation_offload_modules), np.int64
            ),
        )

    def layout_fields(self, i: int) -> dict[str, Any]:
        """Keyword arguments of :class:`Layout` for row i."""
        fp8 = int(self.fp8_param_gather[i])
        graphs: CudaGraphs = CUDA_GRAPHS_CHOICES[int(self.cuda_graphs[i])]
        return {
            "grad_reduce_dtype": "bf16" if self.grad_reduce_bf16[i] else "fp32",
            "optimizer_state_dtype": "bf16" if self.optimizer_state_bf16[i] else "fp32",
            "fp8_param_gather": None if fp8 == FP8_GATHER_AUTO else bool(fp8),
            "recompute_modules": _modules(int(self.recompute_modules[i])),
            "recompute_num_layers": int(self.recompute_num_layers[i]) or None,
            "cuda_graphs": graphs,
            "activation_offload_layers": int(self.activation_offload_layers[i]),
            "optimizer_offload_fraction": float(self.optimizer_offload_fraction[i]),
            "pipeline_layout": str(self.pipeline_layout[i]) or None,
            "activation_offload_modules": offload_modules_of(
                int(self.activation_offload_modules[i])
            ),
        }

    def take(self, index: npt.ArrayLike) -> SettingsColumns:
        idx = np.asarray(index)
        return SettingsColumns(*(getattr(self, f.name)[idx] for f in fields(self)))

    @staticmethod
    def concat(parts: Sequence[SettingsColumns]) -> SettingsColumns:
        return SettingsColumns(
            *(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(SettingsColumns))
        )

    def has(self, bit: int) -> BoolArray:
        """Rows whose recompute modules include ``bit`` (a MODULE_BITS value)."""
        result: BoolArray = (self.recompute_modules & bit) != 0
        return result


@lru_cache(maxsize=16)
def _defaults(n: int) -> SettingsColumns:
    columns = SettingsColumns.from_values(n)
    for f in fields(columns):
        getattr(columns, f.name).setflags(write=False)
    return columns


def effective_modules(batch: LayoutBatch) -> IntArray:
    """Module bit masks with Megatron's default ('core_attn') where selective names none."""
    from planner.layouts import RECOMPUTE_SELECTIVE  # planner.layouts imports this module

    mask = batch.mem.recompute_modules
    selective = batch.recompute == RECOMPUTE_SELECTIVE
    result: IntArray = np.where(selective, np.where(mask == 0, MODULE_BITS["core_attn"], mask), 0)
    return result


def full_recompute_share(settings: SettingsColumns, chunk_layers: FloatArray) -> FloatArray:
    """Share of a chunk's layers that full recompute checkpoints (block method: first N)."""
    n = settings.recompute_num_layers.astype(np.float64)
    share: FloatArray = np.where(n > 0, np.minimum(n / np.maximum(chunk_layers, 1.0), 1.0), 1.0)
    return share
