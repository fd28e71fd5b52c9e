"""``POST /v1/evaluations/bulk``: many layouts of one job in one request, evaluated as ONE
vectorised batch (the planner's rules, memory and performance models on a ``LayoutBatch``) and
streamed back as JSON lines, one per layout in request order.

A single ``POST /v1/evaluations`` spends most of its time outside the models: the request, the
catalog look-ups and the launch flags of one layout. Here the job is resolved once, the layouts
become numpy columns without a ``Layout`` object each, and every line is a few numbers, so the
cost per layout is a few microseconds. The lines carry no Megatron flags: evaluate the layouts
you keep with ``POST /v1/evaluations`` to get those.

``cp_comm_type`` is a layout key; a layout that leaves it unset (missing or null) takes the
request's, and where both leave it open on a cp > 1 layout the planner chooses it as a single
evaluation and the search do (``planner.search.cp_choice``). Every line says which type it was
priced with: null on a cp = 1 layout, which emits no ``--cp-comm-type``.

The route lives in :mod:`app.planning.evaluation_router`; this module holds the request, the
columns and the vectorised pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import ConfigDict, Field
from typing_extensions import TypedDict

from app.planning.schemas import Axis, Dispatcher, EvaluationRequest, Recompute, Sharding, _Common
from planner.layouts import CP_COMM_AUTO
from planner.specs import (
    CP_COMM_TYPES,
    MOE_DISPATCHER_CHOICES,
    OPTIMIZER_SHARDING_CHOICES,
    RECOMPUTE_CHOICES,
    CpCommType,
)

MAX_LAYOUTS = 100_000
LINES_PER_CHUNK = 2048
JSONL = "application/x-ndjson"


class BulkLayout(TypedDict, total=False):
    """One layout: the parallel sizes and options of ``POST /v1/evaluations`` (omitted ones
    take the same defaults). A TypedDict, not a model: 20 000 of them validate in ~40 ms
    instead of ~240 ms."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    tp: Axis
    pp: Axis
    vpp: Axis
    cp: Axis
    ep: Annotated[int, Field(ge=1, le=4096)]
    etp: Axis | None
    micro_batch_size: Annotated[int, Field(ge=1, le=65_536)]
    recompute: Recompute
    sequence_parallel: bool | None
    optimizer_sharding: Sharding
    moe_a2a_overlap: bool | None
    moe_dispatcher: Dispatcher | None
    cp_comm_type: Annotated[
        CpCommType | None,
        Field(
            description="--cp-comm-type of this layout if cp > 1; missing or null: not set on "
            "this layout, so the request's cp_comm_type if it gives one, else the planner's "
            "choice. A cp = 1 layout runs no context parallelism: its line reports null (not "
            "applicable) whatever was asked"
        ),
    ]


class BulkEvaluationRequest(_Common):
    """One job (model, GPUs, batch) and the layouts to evaluate for it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "model": "llama3.1-70b",
                    "gpu": "h100-sxm-80gb",
                    "num_gpus": 64,
                    "seq_length": 8192,
                    "global_batch_size": 128,
                    "layouts": [{"tp": 8, "pp": 4}, {"tp": 4, "pp": 8, "vpp": 2}],
                }
            ]
        },
    )

    num_gpus: int = Field(ge=1, le=65_536)
    global_batch_size: int = Field(ge=1, le=16_777_216)
    layouts: list[BulkLayout] = Field(min_length=1, max_length=MAX_LAYOUTS)


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkResult:
    """Column arrays, element i about layout i."""

    violated: np.ndarray
    """(n, rules) booleans: which of Megatron's rules each layout breaks."""
    rule_summaries: tuple[str, ...]
    fits: np.ndarray
    memory_bytes: np.ndarray
    memory_utilization: np.ndarray
    step_time_s: np.ndarray | None
    tokens_per_s_per_gpu: np.ndarray | None
    mfu: np.ndarray | None
    cp_comm_type: np.ndarray
    """The ``--cp-comm-type`` each layout was priced with (codes of planner.layouts: -1 where
    cp = 1 leaves it unset, or where an invalid layout left it open)."""


DEFAULTS: dict[str, Any] = {
    "tp": 1,
    "pp": 1,
    "vpp": 1,
    "cp": 1,
    "ep": 1,
    "micro_batch_size": 1,
    "recompute": "none",
    "optimizer_sharding": "optimizer",
}


def layout_columns(
    layouts: list[BulkLayout], num_gpus: int, cp_comm_type: str | None = None
) -> dict[str, np.ndarray]:
    """The layouts as numpy columns (the codes of planner.layouts), dp filled in as
    ``POST /v1/evaluations`` fills it: ``max(1, num_gpus // (tp * pp * cp))``; etp defaults to
    tp and sequence parallelism to tp > 1, as ``Layout.normalized`` does; a layout without
    ``cp_comm_type`` (or with null) takes the request's (``cp_comm_type``), else the planner
    chooses it; on a cp = 1 layout it is unset (no context parallelism, no flag)."""
    n = len(layouts)

    def ints(name: str) -> np.ndarray:
        default = DEFAULTS[name]
        return np.fromiter((x.get(name, default) for x in layouts), dtype=np.int64, count=n)

    def codes(name: str, choices: tuple[str, ...], none: int = -1) -> np.ndarray:
        index: dict[Any, int] = {c: i for i, c in enumerate(choices)} | {None: none}
        default = DEFAULTS.get(name)
        return np.fromiter((index[x.get(name, default)] for x in layouts), np.int64, n)

    tp, pp, cp = ints("tp"), ints("pp"), ints("cp")
    etp = np.fromiter((x.get("etp") or 0 for x in layouts), np.int64, n)
    sp = np.fromiter((_sp_code(x.get("sequence_parallel")) for x in layouts), np.int64, n)
    a2a = np.fromiter((_a2a_code(x.get("moe_a2a_overlap")) for x in layouts), np.int64, n)
    return {
        "tp": tp,
        "pp": pp,
        "vpp": ints("vpp"),
        "cp": cp,
        "ep": ints("ep"),
        "etp": np.where(etp == 0, tp, etp),
        "dp": np.maximum(1, num_gpus // (tp * pp * cp)),
        "micro_batch_size": ints("micro_batch_size"),
        "recompute": codes("recompute", RECOMPUTE_CHOICES),
        "sequence_parallel": np.where(sp < 0, tp > 1, sp == 1),
        "optimizer_sharding": codes("optimizer_sharding", OPTIMIZER_SHARDING_CHOICES),
        "moe_a2a_overlap": a2a,
        "moe_dispatcher": codes("moe_dispatcher", MOE_DISPATCHER_CHOICES),
        "cp_comm_type": np.where(cp > 1, _cp_comm_codes(layouts, cp_comm_type), CP_COMM_AUTO),
    }


def _cp_comm_codes(layouts: list[BulkLayout], requested: str | None) -> np.ndarray:
    """Each layout's ``cp_comm_type`` code: its own, else the request's (null = not set)."""
    index: dict[Any, int] = {c: i for i, c in enumerate(CP_COMM_TYPES)} | {None: CP_COMM_AUTO}
    own = (x.get("cp_comm_type") for x in layouts)
    return np.fromiter((index[requested if v is None else v] for v in own), np.int64, len(layouts))


def _sp_code(value: bool | None) -> int:
    return -1 if value is None else int(value)


_a2a_code = _sp_code  # planner.layouts.a2a_code: None -> -1 (automatic), else 0/1


def evaluate_bulk(
    common: dict[str, Any], columns: dict[str, np.ndarray], *, profile: Any = None
) -> BulkResult:
    """Evaluate the layouts of one job in one vectorised pass (the service's default)."""
    from app.planning.compute import profile_for
    from app.planning.convert import parse_request, resolve_cluster, resolve_job, resolve_model
    from planner.layouts import LayoutBatch
    from planner.memory import MemoryOptions, estimate_memory
    from planner.performance import estimate_performance
    from planner.search.cp_choice import choose_open_cp_comm
    from planner.space.rules import RULES, check_rules
    from planner.space.version_rules import pin_unavailable

    # the job's fields checked by the one typed request of the question; layouts default
    req = parse_request(EvaluationRequest, common)
    model = resolve_model(req.model)
    cluster = resolve_cluster(req, req.num_gpus)
    job = resolve_job(req, req.global_batch_size)
    threshold = req.memory_threshold
    # the planner's own switches (None = on where allowed) off where the job's stack lacks
    # them, as a single evaluation and the search do (planner.space.version_rules)
    batch = pin_unavailable(job, LayoutBatch.from_columns(**columns))
    violated = np.asarray(check_rules(model, cluster, job, batch), dtype=np.bool_)
    valid = np.asarray(~violated.any(axis=1), dtype=np.bool_)
    options = MemoryOptions(threshold=threshold)
    # an open --cp-comm-type: the planner's choice, as a single evaluation and the search make it
    batch = choose_open_cp_comm(model, cluster, job, batch, valid, options)
    mem = estimate_memory(model, cluster, job, batch, options)
    perf = None
    if valid.any():
        prof = profile_for(cluster.gpu, profile)
        perf = estimate_performance(model, cluster, job, batch, prof)
    capacity = float(mem.capacity_bytes)
    return BulkResult(
        violated=violated,
        rule_summaries=tuple(rule.summary for rule in RULES),
        fits=np.asarray(mem.fits, dtype=np.bool_),
        memory_bytes=np.asarray(mem.total_bytes, dtype=np.float64),
        memory_utilization=np.asarray(mem.total_bytes, dtype=np.float64) / capacity,
        step_time_s=None if perf is None else np.asarray(perf.step_time_s, np.float64),
        tokens_per_s_per_gpu=None
        if perf is None
        else np.asarray(perf.tokens_per_s_per_gpu, np.float64),
        mfu=None if perf is None else np.asarray(perf.mfu, np.float64),
        cp_comm_type=batch.cp_comm_codes,
    )


def _json_numbers(values: np.ndarray | None, n: int, digits: int | None = None) -> list[str]:
    """JSON text of each number (``null`` for NaN/inf or no values), formatted in bulk."""
    if values is None:
        return ["null"] * n
    if digits is not None:
        values = np.round(values, digits)
    finite = np.isfinite(values).tolist()
    return [repr(v) if ok else "null" for v, ok in zip(values.tolist(), finite, strict=True)]


def json_lines(result: BulkResult) -> Iterator[bytes]:
    """One JSON object per layout, newline-terminated, in chunks of :data:`LINES_PER_CHUNK`.

    Lines are formatted from column texts (not ``json.dumps`` per layout: 6x faster); the
    violation lists are JSON-encoded once per distinct combination."""
    n = int(result.violated.shape[0])
    valid = np.logical_not(np.any(result.violated, axis=1))
    fits = np.where(result.fits, "true", "false").tolist()
    mem = _json_numbers(result.memory_bytes, n)
    util = _json_numbers(result.memory_utilization, n, 6)
    step = _json_numbers(result.step_time_s, n)
    tokens = _json_numbers(result.tokens_per_s_per_gpu, n, 3)
    mfu = _json_numbers(result.mfu, n, 6)
    broken: dict[int, list[str]] = {}
    for i, j in zip(*np.nonzero(result.violated), strict=True):
        broken.setdefault(int(i), []).append(result.rule_summaries[int(j)])
    texts: dict[tuple[str, ...], str] = {}
    violations = ["[]"] * n
    for i, names in broken.items():
        key = tuple(names)
        violations[i] = texts.get(key) or texts.setdefault(key, json.dumps(list(key)))
    ok: list[bool] = valid.tolist()
    type_text = {i: f'"{c}"' for i, c in enumerate(CP_COMM_TYPES)} | {CP_COMM_AUTO: "null"}
    cp_types = [type_text[c] for c in result.cp_comm_type.tolist()]
    for start in range(0, n, LINES_PER_CHUNK):
        lines = [
            f'{{"index":{i},"valid":{"true" if ok[i] else "false"},"violations":{violations[i]},'
            f'"fits":{fits[i]},"memory_bytes":{mem[i]},"memory_utilization":{util[i]},'
            f'"step_time_s":{step[i] if ok[i] else "null"},'
            f'"tokens_per_s_per_gpu":{tokens[i] if ok[i] else "null"},'
            f'"mfu":{mfu[i] if ok[i] else "null"},"cp_comm_type":{cp_types[i]}}}\n'
            for i in range(start, min(n, start + LINES_PER_CHUNK))
        ]
        yield "".join(lines).encode()
