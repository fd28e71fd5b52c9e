"""Megatron's ``--pipeline-model-parallel-layout``: parse, validate and place layers per stage.

Grammar (megatron-facts §1.2, mechanisms-facts §7; Megatron-Core 0.13 ``PipelineParallelLayer
Layout``): one character per layer, ``E`` the embedding, ``t`` a decoder layer, ``m`` an MTP
layer, ``L`` the loss (final norm, output layer, cross-entropy); ``|`` separates virtual stages;
``X*n`` repeats one character and ``(...)*n`` a group (groups may nest); commas and spaces are
ignored. NVIDIA's DeepSeek-V3 layouts: ``Et|(tt|)*30mL`` (H100, PP8 x VPP4) and ``Et*3|(tttt|)*14
tmL``-style forms. The number of virtual stages is p x v, and virtual stage k runs on pipeline rank
k mod p as its model chunk k // p (megatron-facts §1.2).

Checks Megatron makes when it builds the model (rule 14): stages = p x v, exactly one ``E`` at the
start of the first stage, exactly one ``L`` at the end of the last stage, ``t`` count = num_layers,
``m`` count = mtp_num_layers; the MTP layers follow the decoder in one stage [inferred: the MTP
block is built as one module after the decoder].
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from planner.layouts import BoolArray, FloatArray, IntArray, LayoutBatch
from planner.specs import SpecError

__all__ = [
    "PipelineLayout",
    "RankLayers",
    "balanced_layout",
    "layout_rank_layers",
    "parse_pipeline_layout",
]

_FIELD = "pipeline_layout"
_SYMBOLS = frozenset("EtmL|")
_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_SINGLE = re.compile(r"([EtmL|])\*(\d+)")
_MAX_SYMBOLS = 100_000


def _repeat(match: re.Match[str]) -> str:
    body, count = match.group(1), int(match.group(2))
    if len(body) * count > _MAX_SYMBOLS:
        raise SpecError(f"{_FIELD} expands to more than {_MAX_SYMBOLS} symbols", field=_FIELD)
    return body * count


def _expand(text: str) -> str:
    """Expand ``X*n`` and ``(...)*n`` repetitions, innermost groups first."""
    original = text
    previous = None
    while previous != text:
        previous = text
        text = _SINGLE.sub(_repeat, text)
        text = _GROUP.sub(_repeat, text)
        if len(text) > _MAX_SYMBOLS:
            raise SpecError(f"{_FIELD} expands to more than {_MAX_SYMBOLS} symbols", field=_FIELD)
    if "(" in text or ")" in text or "*" in text:
        raise SpecError(
            f"{_FIELD}: unbalanced parentheses or a '*' without a count in {original!r}; write "
            "repetitions as 't*3' or '(tt|)*30'",
            field=_FIELD,
        )
    return text


@dataclass(frozen=True, slots=True)
class PipelineLayout:
    """An expanded layout: the layer symbols of each virtual stage, in Megatron's stage order."""

    text: str
    """The layout as the user wrote it (emitted verbatim as the Megatron flag)."""
    stages: tuple[str, ...]
    """One string of symbols (E, t, m, L) per virtual stage."""

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    def count(self, symbol: str) -> int:
        return sum(stage.count(symbol) for stage in self.stages)

    def validate(self, *, pp: int, vpp: int, num_layers: int, mtp_num_layers: int) -> None:
        """Raise :class:`SpecError` unless Megatron accepts this layout (rule 14)."""
        if self.num_stages != pp * vpp:
            valid = [v for v in range(1, self.num_stages + 1) if v * pp == self.num_stages]
            hint = f"set vpp={valid[0]}" if valid else f"use a multiple of pp={pp} stages"
            raise SpecError(
                f"{_FIELD} has {self.num_stages} stages but pp x vpp = {pp} x {vpp} = "
                f"{pp * vpp}; {hint}",
                field=_FIELD,
            )
        self.validate_model(num_layers=num_layers, mtp_num_layers=mtp_num_layers)

    def validate_grammar(self) -> None:
        """The model-free checks (megatron-facts §1.2, rule 14): one 'E' opening the first
        stage, one 'L' closing the last, at least one decoder layer 't'."""
        if self.count("E") != 1 or not self.stages[0].startswith("E"):
            raise SpecError(
                f"{_FIELD} must start with exactly one embedding 'E' in its first stage "
                f"(got {self.text!r}); e.g. 'Et|(tt|)*30mL'",
                field=_FIELD,
            )
        if self.count("L") != 1 or not self.stages[-1].endswith("L"):
            raise SpecError(
                f"{_FIELD} must end with exactly one loss 'L' in its last stage "
                f"(got {self.text!r}); e.g. 'Et|(tt|)*30mL'",
                field=_FIELD,
            )
        if self.count("t") == 0:
            raise SpecError(
                f"{_FIELD} {self.text!r} places no decoder layer 't'; e.g. 'Et|(tt|)*30mL'",
                field=_FIELD,
            )

    def validate_model(self, *, num_layers: int, mtp_num_layers: int) -> None:
        """The checks against the model (layer and MTP counts, embedding and loss placement)."""
        self.validate_grammar()
        decoder = self.count("t")
        if decoder != num_layers:
            raise SpecError(
                f"{_FIELD} places {decoder} decoder layers ('t') but the model has "
                f"num_layers={num_layers}; add or remove {abs(num_layers - decoder)} 't'",
                field=_FIELD,
            )
        mtp = self.count("m")
        if mtp != mtp_num_layers:
            raise SpecError(
                f"{_FIELD} places {mtp} MTP layers ('m') but the model has "
                f"mtp_num_layers={mtp_num_layers}; write exactly {mtp_num_layers} 'm', or, for "
                f"a run {'without MTP' if mtp == 0 else f'with {mtp} MTP layers'}, give the model "
                f"with mtp_num_layers={mtp} (an inline model or spec file: `planner catalog "
                "show MODEL --json`, edited)",
                field=_FIELD,
            )
        if mtp:
            holders = [i for i, s in enumerate(self.stages) if "m" in s]
            last_t = max((i for i, s in enumerate(self.stages) if "t" in s), default=-1)
            stage = self.stages[holders[0]]
            if len(holders) > 1 or holders[0] < last_t or stage.rfind("t") > stage.find("m"):
                raise SpecError(
                    f"{_FIELD}: the MTP layers 'm' must sit together in one stage after the "
                    f"last decoder layer (got {self.text!r}); e.g. '...|tt|mL'",
                    field=_FIELD,
                )

    # --- placement --------------------------------------------------------------------------
    def chunk_stages(self, pp: int, rank: int) -> list[int]:
        """Virtual-stage indexes held by one pipeline rank, in chunk order."""
        return list(range(rank, self.num_stages, pp))

    def decoder_ranges(self) -> list[range]:
        """Global decoder-layer indexes of each virtual stage."""
        out: list[range] = []
        start = 0
        for stage in self.stages:
            n = stage.count("t")
            out.append(range(start, start + n))
            start += n
        return out

    def rank_layers(self, pp: int, rank: int) -> list[int]:
        """Decoder-layer indexes on one pipeline rank (all its chunks)."""
        ranges = self.decoder_ranges()
        return [i for k in self.chunk_stages(pp, rank) for i in ranges[k]]

    def max_rank_layers(self, pp: int) -> int:
        """Decoder layers on the busiest rank (the pipeline's pace)."""
        return max(len(self.rank_layers(pp, r)) for r in range(pp))

    def mtp_rank(self, pp: int) -> int:
        """Pipeline rank that runs the MTP layers: the one holding the 'm' stage (virtual stage
        k on rank k mod p, megatron-facts §1.2), else the last rank (mechanisms-facts §7)."""
        holders = [i for i, s in enumerate(self.stages) if "m" in s]
        return holders[0] % pp if holders else pp - 1


@lru_cache(maxsize=256)
def parse_pipeline_layout(text: str) -> PipelineLayout:
    """Parse a layout string; raise :class:`SpecError` naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError(
            f"{_FIELD} must be a non-empty string such as 'Et|(tt|)*30mL'", field=_FIELD
        )
    compact = text.replace(",", "").replace(" ", "")
    bad = sorted(set(compact) - _SYMBOLS - set("()*0123456789"))
    if bad:
        raise SpecError(
            f"{_FIELD} {text!r} contains {', '.join(map(repr, bad))}; use E (embedding), "
            "t (decoder layer), m (MTP layer), L (loss), '|' between stages and 'x*n' or "
            "'(...)*n' repetitions",
            field=_FIELD,
        )
    expanded = _expand(compact)
    if set(expanded) - _SYMBOLS:  # a number not after '*' (e.g. '0', 't3')
        raise SpecError(
            f"{_FIELD} {text!r} has a number that is not a repetition count; write counts "
            "after '*' ('t*3', '(tt|)*30'), e.g. 'Et|(tt|)*30mL'",
            field=_FIELD,
        )
    return PipelineLayout(text=text, stages=tuple(expanded.split("|")))


def _compress(stages: list[str]) -> str:
    """Write stages with '(...|)*n' for runs of equal stages and 'x*n' inside a stage."""

    def stage_text(stage: str) -> str:
        t = stage.count("t")
        body = "t" * t if t <= 3 else f"t*{t}"
        return stage.replace("t" * t, body, 1) if t else stage

    out: list[str] = []
    i = 0
    while i < len(stages):
        j = i
        while j + 1 < len(stages) and stages[j + 1] == stages[i]:
            j += 1
        run, text = j - i + 1, stage_text(stages[i])
        out.append(f"({text}|)*{run}" if run > 2 else "|".join([text] * run) + "|")
        i = j + 1
    return "".join(out).removesuffix("|")


@lru_cache(maxsize=1024)
def balanced_layout(num_layers: int, mtp_num_layers: int, pp: int, vpp: int) -> str | None:
    """A layout that spreads the work evenly over p x v virtual stages, counting the embedding,
    the loss and each MTP layer as one decoder layer's worth (NVIDIA's DeepSeek-V3 layout
    ``Et|(tt|)*30mL`` is this rule for 61 layers + MTP on 8 x 4 stages). None when every
    stage cannot hold at least one unit or the MTP layers do not fit in the last stage."""
    stages = pp * vpp
    units = num_layers + 2 + mtp_num_layers
    if stages < 2 or units < stages:
        return None
    quota = [units // stages] * stages
    for k in range(units - sum(quota)):  # the remainder goes to the middle stages, last first
        quota[stages - 2 - (k % max(stages - 2, 1))] += 1
    last_decoder = quota[-1] - 1 - mtp_num_layers
    if quota[0] < 1 or last_decoder < 0:
        return None
    counts = [quota[0] - 1, *quota[1:-1], last_decoder]
    texts = ["t" * c for c in counts]
    texts[0] = "E" + texts[0]
    texts[-1] = texts[-1] + "m" * mtp_num_layers + "L"
    layout = _compress(texts)
    parsed = parse_pipeline_layout(layout)
    parsed.validate(pp=pp, vpp=vpp, num_layers=num_layers, mtp_num_layers=mtp_num_layers)
    return layout


def _per_layout(
    batch: LayoutBatch, rows: IntArray, values: Callable[[PipelineLayout, int], tuple[float, ...]]
) -> FloatArray:
    """``values(parsed layout, pp)`` for each of ``rows`` (rows x values), one parse per
    distinct (layout, pp)."""
    texts, code = np.unique(batch.mem.pipeline_layout[rows].astype(str), return_inverse=True)
    keys = np.stack([code.reshape(-1), batch.pp[rows]], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    per_key = np.array(
        [values(parse_pipeline_layout(str(texts[c])), p) for c, p in unique.tolist()],
        dtype=np.float64,
    )
    result: FloatArray = per_key[inverse.reshape(-1)]
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class RankLayers:
    """Decoder layers per pipeline rank that the step time reads, per layout."""

    busiest: FloatArray
    """On the busiest rank (the pipeline's pace)."""
    last: FloatArray
    """On the last rank (with the output layer and the loss)."""
    mtp: FloatArray
    """On the rank that runs the MTP layers."""
    mtp_on_last: BoolArray
    """The MTP layers run on the last rank: always without a layout (mechanisms-facts §7)."""


def layout_rank_layers(batch: LayoutBatch, busiest: FloatArray, last: FloatArray) -> RankLayers:
    """The ranks' decoder layers, from the layout where given (else ``busiest`` and ``last``);
    the MTP layers run on the rank of the layout's 'm' stage (:meth:`PipelineLayout.mtp_rank`)."""
    busiest, last = busiest.astype(np.float64).copy(), last.astype(np.float64).copy()
    mtp, on_last = last.copy(), np.ones(len(batch), dtype=np.bool_)
    rows = np.flatnonzero(batch.mem.has_layout)
    if rows.size:

        def per_rank(lay: PipelineLayout, p: int) -> tuple[float, ...]:
            r = lay.mtp_rank(p)
            last_n, mtp_n = len(lay.rank_layers(p, p - 1)), len(lay.rank_layers(p, r))
            return lay.max_rank_layers(p), last_n, mtp_n, float(r == p - 1)

        values = _per_layout(batch, rows, per_rank)
        busiest[rows], last[rows], mtp[rows] = values[:, 0], values[:, 1], values[:, 2]
        on_last[rows] = values[:, 3] > 0
    return RankLayers(busiest=busiest, last=last, mtp=mtp, mtp_on_last=on_last)
