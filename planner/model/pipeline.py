"""How the decoder layers are split over pipeline ranks and virtual stages.

Megatron accepts three splits (megatron-facts §1.2 and §2.2 rules 8-13), tried in this order:

* ``even``: L mod (p v) = 0, every virtual stage holds L / (p v) layers (rules 8-10);
* ``account``: ``--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split``
  count the embedding and the loss as one layer each: (L + 2) mod (p v) = 0, and the first and
  last virtual stages build one decoder layer fewer (rule 13). Llama-3.1-405B: 126 + 2 = 8 x 16;
* ``uneven``: ``--decoder-first-pipeline-num-layers f --decoder-last-pipeline-num-layers l``:
  the middle p - 2 ranks hold (L - f - l) / (p - 2) each, every count a multiple of v (rule 12).
  DeepSeek-V3 (61 layers) on 16 stages: f = 4, l = 1, 4 on each middle rank (the last rank also
  runs the output layer, the loss and the MTP layer).

The planner picks the first that exists; ``None`` means Megatron cannot split L over p x v.
Chunks are numbered as Megatron numbers virtual stages: chunk k lives on rank k mod p. An older
Megatron-Core lacks some of them (``lacking``, from ``planner.space.version_rules.split_lacking``):
the account-for flags before 0.11, the uneven stages before 0.9, and uneven stages with
interleaving before 0.12 (the only VPP flag before then, the layers per virtual stage, cannot be
combined with them: megatron-facts rule 9).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from planner.layouts import FloatArray, IntArray, LayoutBatch
from planner.specs import ModelSpec

SplitMethod = Literal["even", "account", "uneven"]
METHOD_CODES: dict[SplitMethod | None, int] = {None: -1, "even": 0, "account": 1, "uneven": 2}
NOTHING_LACKING: frozenset[str] = frozenset()
"""Split kinds a release lacks: "account", "uneven", "uneven_interleaved" (none: the newest)."""


@dataclass(frozen=True, slots=True)
class PipelineSplit:
    """Decoder layers of each virtual stage (chunk), in Megatron's chunk order."""

    method: SplitMethod
    pp: int
    vpp: int
    chunks: tuple[int, ...]
    first_stage_layers: int = 0
    """``--decoder-first-pipeline-num-layers`` (uneven split only)."""
    last_stage_layers: int = 0
    """``--decoder-last-pipeline-num-layers`` (uneven split only)."""

    def rank_layers(self, rank: int) -> list[int]:
        """Indexes of the decoder layers on one pipeline rank."""
        out: list[int] = []
        start = 0
        for k, size in enumerate(self.chunks):
            if k % self.pp == rank:
                out.extend(range(start, start + size))
            start += size
        return out

    def max_rank_layers(self) -> int:
        return max(len(self.rank_layers(r)) for r in range(self.pp))


def _uneven(num_layers: int, pp: int, vpp: int) -> tuple[int, int] | None:
    """(first, last) layer counts for the most balanced uneven split, or None."""
    best: tuple[int, int, int] | None = None  # (worst rank, last, first)
    mid_ranks = pp - 2
    for first in range(vpp, num_layers + 1, vpp):
        for last in range(vpp, num_layers - first + 1, vpp):
            rest = num_layers - first - last
            if mid_ranks == 0:
                if rest != 0:
                    continue
                per = 0
            elif rest <= 0 or rest % mid_ranks or (rest // mid_ranks) % vpp:
                continue
            else:
                per = rest // mid_ranks
            # minimise the largest rank; then the lightest last rank, which also runs the
            # output layer, the loss and any MTP layers; then the lightest first rank
            score = (max(first, last, per), last, first)
            if best is None or score < best:
                best = score
    return None if best is None else (best[2], best[1])


@lru_cache(maxsize=4096)
def split_layers(
    num_layers: int, pp: int, vpp: int, lacking: frozenset[str] = NOTHING_LACKING
) -> PipelineSplit | None:
    """The split Megatron will build for L layers on p ranks x v virtual stages, or None;
    ``lacking``: the split kinds the job's release does not have."""
    if pp < 1 or vpp < 1 or (vpp > 1 and pp < 2):
        return None
    stages = pp * vpp
    if num_layers % stages == 0:
        return PipelineSplit("even", pp, vpp, (num_layers // stages,) * stages)
    if pp == 1:
        return None
    if (
        "account" not in lacking
        and (num_layers + 2) % stages == 0
        and (num_layers + 2) // stages >= 2
    ):
        per = (num_layers + 2) // stages
        chunks = [per] * stages
        chunks[0] -= 1  # the embedding takes one layer's slot on the first virtual stage
        chunks[-1] -= 1  # the loss takes one on the last
        return PipelineSplit("account", pp, vpp, tuple(chunks))
    if "uneven" in lacking or (vpp > 1 and "uneven_interleaved" in lacking):
        return None
    found = _uneven(num_layers, pp, vpp)
    if found is None:
        return None
    first, last = found
    mid = (num_layers - first - last) // (pp - 2) if pp > 2 else 0
    chunks = []
    for k in range(stages):
        rank = k % pp
        total = first if rank == 0 else last if rank == pp - 1 else mid
        chunks.append(total // vpp)
    return PipelineSplit("uneven", pp, vpp, tuple(chunks), first, last)


@dataclass(frozen=True, slots=True)
class SplitArrays:
    """Per-layout split facts as arrays (one entry per layout of a batch)."""

    method: IntArray
    """METHOD_CODES of the split; -1 where none exists."""
    max_rank_layers: FloatArray
    """Decoder layers on the busiest rank (sets the pipeline's pace)."""


def split_arrays(
    num_layers: int, batch: LayoutBatch, lacking: frozenset[str] = NOTHING_LACKING
) -> SplitArrays:
    """:func:`split_layers` for every layout, computed once per distinct (pp, vpp)."""
    keys = batch.pp * 65536 + batch.vpp
    unique, inverse = np.unique(keys, return_inverse=True)
    method = np.empty(unique.shape[0], dtype=np.int64)
    busiest = np.empty(unique.shape[0], dtype=np.float64)
    for i, key in enumerate(unique.tolist()):
        pp, vpp = divmod(int(key), 65536)
        split = split_layers(num_layers, pp, vpp, lacking)
        method[i] = METHOD_CODES[None if split is None else split.method]
        busiest[i] = np.nan if split is None else split.max_rank_layers()
    idx = inverse.reshape(-1)
    return SplitArrays(method=method[idx], max_rank_layers=busiest[idx])


def pipeline_flags(
    num_layers: int, pp: int, vpp: int, lacking: frozenset[str] = NOTHING_LACKING
) -> list[str]:
    """The Megatron flags that realise the split (empty for an even split)."""
    split = split_layers(num_layers, pp, vpp, lacking)
    if split is None or split.method == "even":
        return []
    if split.method == "account":
        return ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    return [
        "--decoder-first-pipeline-num-layers",
        str(split.first_stage_layers),
        "--decoder-last-pipeline-num-layers",
        str(split.last_stage_layers),
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class StageLayers:
    """Dense and MoE decoder layers held by the first and the last pipeline rank."""

    first_dense: FloatArray
    first_moe: FloatArray
    last_dense: FloatArray
    last_moe: FloatArray

    @property
    def last(self) -> FloatArray:
        """Decoder layers on the last rank (which also runs the output layer and the loss)."""
        return np.asarray(self.last_dense + self.last_moe, np.float64)

    @property
    def busiest(self) -> FloatArray:
        """Decoder layers on the busiest rank, which sets the pipeline's pace."""
        first = self.first_dense + self.first_moe
        return np.asarray(np.maximum(first, self.last), np.float64)


def _rank_layers(
    is_moe: list[bool], pp: int, vpp: int, rank: int, lacking: frozenset[str]
) -> tuple[int, int]:
    """(dense, MoE) decoder layers on one rank under the split the release builds
    (:func:`split_layers`: on core 0.9-0.10 uneven first/last stages, not account-for)."""
    split = split_layers(len(is_moe), pp, vpp, lacking)
    if split is None:  # no split exists (the rules reject it): charge an even share
        per = -(-len(is_moe) // (pp * vpp)) * vpp
        return per, 0
    layers = split.rank_layers(rank)
    moe = sum(is_moe[i] for i in layers)
    return len(layers) - moe, moe


def _busiest_front_rank(
    is_moe: list[bool], pp: int, vpp: int, lacking: frozenset[str]
) -> tuple[int, int]:
    """Layers charged to the first rank: the most of any rank but the last.

    With an even split that is rank 0 itself. With an uneven or embedding+loss split rank 0
    holds fewer layers than rank 1, which has only one micro-batch fewer in flight, so rank 1
    can be the most loaded GPU; charging rank 0 (embedding, most micro-batches in flight) with
    the largest layer count of ranks 0..p-2 bounds every rank but the last from above.
    """
    counts = [_rank_layers(is_moe, pp, vpp, r, lacking) for r in range(max(pp - 1, 1))]
    return max(counts, key=lambda c: (c[0] + c[1], c[1]))


def stage_layers(
    model: ModelSpec, batch: LayoutBatch, lacking: frozenset[str] = NOTHING_LACKING
) -> StageLayers:
    """Layer counts of rank 0 and rank p-1 for every layout (loop over distinct (pp, vpp)).

    Rank 0 is charged the most layers of ranks 0..p-2 (:func:`_busiest_front_rank`); where no
    split exists (the rules reject the layout) every rank gets an even share, all dense.
    ``lacking``: the split kinds the job's release lacks (``split_lacking(job)``), so that memory
    and speed charge the split the launch flags build (mechanisms-facts §7: account-for 0.11,
    uneven stages 0.9).
    """
    pattern = model.moe_layer_pattern()
    keys = batch.pp * 65536 + batch.vpp
    unique, inverse = np.unique(keys, return_inverse=True)
    table = np.zeros((unique.shape[0], 4))
    for i, key in enumerate(unique.tolist()):
        pp, vpp = divmod(int(key), 65536)
        table[i, 0:2] = _busiest_front_rank(pattern, pp, vpp, lacking)
        table[i, 2:4] = _rank_layers(pattern, pp, vpp, pp - 1, lacking)
    rows = table[inverse.reshape(-1)]
    return StageLayers(
        first_dense=rows[:, 0],
        first_moe=rows[:, 1],
        last_dense=rows[:, 2],
        last_moe=rows[:, 3],
    )
