"""A batch of layouts as parallel numpy arrays (structure of arrays).

Every model in the planner (rules, memory, FLOPs, performance) takes a :class:`LayoutBatch` and
returns arrays of the same length, so that thousands of candidate layouts are evaluated in a few
vectorised numpy expressions instead of one Python object at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.layout_settings import SettingsColumns
from planner.specs import (
    CP_COMM_TYPES,
    MOE_DISPATCHER_CHOICES,
    OPTIMIZER_SHARDING_CHOICES,
    RECOMPUTE_CHOICES,
    CpCommType,
    Layout,
    MoeDispatcher,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL = 0, 1, 2
SHARD_NONE, SHARD_OPTIMIZER, SHARD_FULL = 0, 1, 2
A2A_AUTO, A2A_OFF, A2A_ON = -1, 0, 1
"""Codes of ``moe_a2a_overlap``: None (on where allowed), False, True."""


def a2a_code(value: bool | None) -> int:
    return A2A_AUTO if value is None else int(value)


def a2a_value(code: int) -> bool | None:
    return None if code == A2A_AUTO else bool(code)


DISPATCH_AUTO, DISPATCH_ALLTOALL, DISPATCH_FLEX = -1, 0, 1
"""Codes of ``moe_dispatcher``: None (planner's choice), 'alltoall', 'flex'."""


def dispatcher_code(value: str | None) -> int:
    return DISPATCH_AUTO if value is None else MOE_DISPATCHER_CHOICES.index(value)


def dispatcher_value(code: int) -> MoeDispatcher | None:
    return None if code == DISPATCH_AUTO else MOE_DISPATCHER_CHOICES[code]


CP_COMM_AUTO = -1
"""Code of ``cp_comm_type`` None, left open: searches and evaluations choose a type per layout
(planner.search.cp_choice), and the models price a code still open as p2p, Megatron's default.
Other codes index CP_COMM_TYPES."""


def cp_comm_code(value: str | None) -> int:
    return CP_COMM_AUTO if value is None else CP_COMM_TYPES.index(value)


@dataclass(frozen=True, slots=True)
class LayoutBatch:
    """n layouts; field i of every array describes layout i.

    ``recompute`` holds codes 0/1/2 (none/selective/full) and ``optimizer_sharding`` codes
    0/1/2 (none/optimizer/full), indexes into RECOMPUTE_CHOICES and OPTIMIZER_SHARDING_CHOICES;
    ``moe_a2a_overlap`` holds A2A_AUTO/A2A_OFF/A2A_ON and ``moe_dispatcher`` DISPATCH_*.
    """

    tp: IntArray
    pp: IntArray
    vpp: IntArray
    cp: IntArray
    ep: IntArray
    etp: IntArray
    dp: IntArray
    micro_batch_size: IntArray
    recompute: IntArray
    sequence_parallel: BoolArray
    optimizer_sharding: IntArray
    moe_a2a_overlap: IntArray
    moe_dispatcher: IntArray
    settings: SettingsColumns | None = None
    """Memory settings (planner.layout_settings); None: every layout at its defaults."""
    cp_comm_type: IntArray | None = None
    """``cp_comm_type`` codes (CP_COMM_AUTO or an index of CP_COMM_TYPES); None: all auto."""

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_layouts(cls, layouts: Iterable[Layout]) -> LayoutBatch:
        items = [lay.normalized() for lay in layouts]

        def col(name: str) -> IntArray:
            return np.fromiter((getattr(x, name) for x in items), dtype=np.int64, count=len(items))

        return cls(
            tp=col("tp"),
            pp=col("pp"),
            vpp=col("vpp"),
            cp=col("cp"),
            ep=col("ep"),
            etp=col("etp"),
            dp=col("dp"),
            micro_batch_size=col("micro_batch_size"),
            recompute=np.fromiter(
                (RECOMPUTE_CHOICES.index(x.recompute) for x in items), np.int64, len(items)
            ),
            sequence_parallel=np.fromiter(
                (bool(x.sequence_parallel) for x in items), np.bool_, len(items)
            ),
            optimizer_sharding=np.fromiter(
                (OPTIMIZER_SHARDING_CHOICES.index(x.optimizer_sharding) for x in items),
                np.int64,
                len(items),
            ),
            moe_a2a_overlap=np.fromiter(
                (a2a_code(x.moe_a2a_overlap) for x in items), np.int64, len(items)
            ),
            moe_dispatcher=np.fromiter(
                (dispatcher_code(x.moe_dispatcher) for x in items), np.int64, len(items)
            ),
            settings=SettingsColumns.from_layouts(items),
            cp_comm_type=np.fromiter(
                (cp_comm_code(x.cp_comm_type) for x in items), np.int64, len(items)
            ),
        )

    @classmethod
    def from_columns(cls, **columns: Sequence[int] | npt.ArrayLike) -> LayoutBatch:
        """Build from equal-length columns; etp defaults to tp, sp to tp > 1."""
        n = len(np.asarray(columns["tp"]))

        def get(name: str, default: npt.ArrayLike) -> IntArray:
            value = columns.get(name, default)
            return np.broadcast_to(np.asarray(value, dtype=np.int64), (n,)).copy()

        tp = get("tp", 1)
        sp = columns.get("sequence_parallel")
        return cls(
            tp=tp,
            pp=get("pp", 1),
            vpp=get("vpp", 1),
            cp=get("cp", 1),
            ep=get("ep", 1),
            etp=get("etp", tp),
            dp=get("dp", 1),
            micro_batch_size=get("micro_batch_size", 1),
            recompute=get("recompute", RECOMPUTE_NONE),
            sequence_parallel=(
                tp > 1
                if sp is None
                else np.broadcast_to(np.asarray(sp, dtype=np.bool_), (n,)).copy()
            ),
            optimizer_sharding=get("optimizer_sharding", SHARD_OPTIMIZER),
            moe_a2a_overlap=get("moe_a2a_overlap", A2A_AUTO),
            moe_dispatcher=get("moe_dispatcher", DISPATCH_AUTO),
            cp_comm_type=get("cp_comm_type", CP_COMM_AUTO) if "cp_comm_type" in columns else None,
        )

    def layout(self, i: int) -> Layout:
        return Layout(
            tp=int(self.tp[i]),
            pp=int(self.pp[i]),
            vpp=int(self.vpp[i]),
            cp=int(self.cp[i]),
            ep=int(self.ep[i]),
            etp=int(self.etp[i]),
            dp=int(self.dp[i]),
            micro_batch_size=int(self.micro_batch_size[i]),
            recompute=RECOMPUTE_CHOICES[int(self.recompute[i])],
            sequence_parallel=bool(self.sequence_parallel[i]),
            optimizer_sharding=OPTIMIZER_SHARDING_CHOICES[int(self.optimizer_sharding[i])],
            moe_a2a_overlap=a2a_value(int(self.moe_a2a_overlap[i])),
            moe_dispatcher=dispatcher_value(int(self.moe_dispatcher[i])),
            cp_comm_type=self.cp_comm_value(i),
            **(self.settings.layout_fields(i) if self.settings is not None else {}),
        )

    @property
    def cp_comm_codes(self) -> IntArray:
        """``cp_comm_type`` codes, CP_COMM_AUTO where the batch carries none."""
        if self.cp_comm_type is None:
            return np.full(len(self), CP_COMM_AUTO, dtype=np.int64)
        return self.cp_comm_type

    def cp_comm_value(self, i: int) -> CpCommType | None:
        code = CP_COMM_AUTO if self.cp_comm_type is None else int(self.cp_comm_type[i])
        return None if code == CP_COMM_AUTO else CP_COMM_TYPES[code]

    def layouts(self) -> list[Layout]:
        return [self.layout(i) for i in range(len(self))]

    def take(self, index: npt.ArrayLike) -> LayoutBatch:
        """The sub-batch selected by an integer index array or a boolean mask."""
        idx = np.asarray(index)
        return LayoutBatch(
            tp=self.tp[idx],
            pp=self.pp[idx],
            vpp=self.vpp[idx],
            cp=self.cp[idx],
            ep=self.ep[idx],
            etp=self.etp[idx],
            dp=self.dp[idx],
            micro_batch_size=self.micro_batch_size[idx],
            recompute=self.recompute[idx],
            sequence_parallel=self.sequence_parallel[idx],
            optimizer_sharding=self.optimizer_sharding[idx],
            moe_a2a_overlap=self.moe_a2a_overlap[idx],
            moe_dispatcher=self.moe_dispatcher[idx],
            settings=None if self.settings is None else self.settings.take(idx),
            cp_comm_type=None if self.cp_comm_type is None else self.cp_comm_type[idx],
        )

    @staticmethod
    def concat(batches: Sequence[LayoutBatch]) -> LayoutBatch:
        def cat(name: str) -> Any:
            return np.concatenate([getattr(b, name) for b in batches])

        return LayoutBatch(
            tp=cat("tp"),
            pp=cat("pp"),
            vpp=cat("vpp"),
            cp=cat("cp"),
            ep=cat("ep"),
            etp=cat("etp"),
            dp=cat("dp"),
            micro_batch_size=cat("micro_batch_size"),
            recompute=cat("recompute"),
            sequence_parallel=cat("sequence_parallel"),
            optimizer_sharding=cat("optimizer_sharding"),
            moe_a2a_overlap=cat("moe_a2a_overlap"),
            moe_dispatcher=cat("moe_dispatcher"),
            settings=(
                None
                if all(b.settings is None for b in batches)
                else SettingsColumns.concat([b.mem for b in batches])
            ),
            cp_comm_type=(
                None
                if all(b.cp_comm_type is None for b in batches)
                else np.concatenate([b.cp_comm_codes for b in batches])
            ),
        )

    @property
    def mem(self) -> SettingsColumns:
        """The memory settings, defaults filled in where the batch carries none."""
        return SettingsColumns.defaults(len(self)) if self.settings is None else self.settings

    @property
    def model_parallel_size(self) -> IntArray:
        return self.tp * self.pp * self.cp

    @property
    def num_gpus(self) -> IntArray:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def expert_dp(self) -> IntArray:
        """d_e = W / (t_e e p) (megatron-facts §2.1 rule 3); 0 where it does not divide."""
        denom = self.etp * self.ep * self.pp
        w = self.num_gpus
        return np.where(w % denom == 0, w // np.maximum(denom, 1), 0)

    def num_microbatches(self, global_batch_size: int) -> IntArray:
        """m = B / (b d) (megatron-facts §3.2); 0 where it does not divide."""
        per = self.micro_batch_size * self.dp
        return np.where(global_batch_size % per == 0, global_batch_size // per, 0)
