"""Measured training runs: load the published-throughput CSV (and Megatron-log rows) as domain
objects for calibration and for the accuracy benchmark.

The column set is that of ``shared/data/measured-throughput.csv`` (its README explains every
column). The loader fills nothing from guesses: a row whose architecture or parallel layout is
incomplete is skipped with a reason (:func:`parse_rows` returns them). The only defaults applied
are the documented ones:

* cp, ep empty -> 1 (CP/EP are off unless configured); the MoE all-to-all overlap is off
  (Megatron's default) unless an optional ``moe_a2a_overlap`` column says yes, and the token
  dispatcher is NCCL's alltoall unless a ``moe_dispatcher`` column says flex; vpp empty -> 1
  only with pp = 1, where it means nothing. With pp > 1 an empty vpp ("not stated", README)
  skips the row: the bubble, a (pp - 1) / (m x vpp) share of the step, cannot be known;
* recompute / sequence_parallel / distributed_optimizer empty on NVIDIA recipe rows -> the
  README's defaults (recompute none, SP when tp > 1, distributed optimizer); on other sources an
  empty recompute skips the row;
* fp16 and "mixed" are timed as bf16 (same tensor-core rate); an empty precision on a GPU without
  fp8 is bf16 (nothing else trains there);
* empty num_query_groups means multi-head attention (Megatron's default without
  ``--group-query-attention``, megatron-facts §1.4);
* the gated (SwiGLU) MLP is taken from the model family in ``model_name`` (Llama, Mistral,
  Mixtral, Qwen, DeepSeek); GPT, Nemotron and BLOOM use a plain MLP;
* with ``model_lookup`` (the caller's catalog), a row naming a published model takes the
  architecture columns it leaves empty from the catalog when the columns it gives agree
  (:mod:`planner.calibration.measurement_arch`; the derivation records which fields were filled).

Software stack (issue 12 item 1): optional columns named as the fields, ``tp_comm_overlap``,
``attention_backend``, ``cross_entropy_fusion``, ``moe_imbalance`` (TrainingJob) and
``cuda_graphs``, ``grad_reduce_dtype`` (Layout); an empty or missing column is the field's
default. The published CSV has none of them: callers annotate its rows first with what each
source states (``models_db.measurement_stacks``, which also fills each era's defaults).

Tokens/s per GPU: the printed value; else global batch x seq / (step time x GPUs); else the
printed TFLOP/s (or MFU/HFU x the bf16 peak) divided by the FLOPs per token of the row's
``tflops_basis`` (paper formula 96 l h^2 (1 + s/6h + V/16lh) with recompute for hardware FLOPs,
72 l h^2 (1 + s/6h + V/12lh) for model FLOPs; megatron-facts §6), only for GPT-shaped models
(MHA, plain MLP, F = 4h) where those formulas hold.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.calibration.measurement_arch import ArchSkip, row_model
from planner.calibration.measurement_arch import whole_number as _int
from planner.plain_numbers import IN_DECIMAL_DIGITS, read_decimal, too_large
from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, SpecError, TrainingJob
from planner.stack_settings import STACK_FIELDS

ModelLookup = Callable[[str], ModelSpec | None]
"""model_name -> the catalog model it names (None: not a catalog model)."""

NVIDIA_RECIPE_SOURCES = frozenset(
    {"megatron_readme_h100", "nemo_perf_24.07", "dgxc_benchmarking_v25.04"}
)
"""Sources whose unstated recompute/SP/optimizer follow NVIDIA's recipes (data README)."""
PRE_DISTRIBUTED_OPTIMIZER_SOURCES = frozenset({"narayanan2021", "korthikanti2022"})
"""Megatron-LM papers that predate the distributed optimizer: unstated means none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One measured run: what ran, where, how, and how fast."""

    row_id: str
    source_id: str
    sweep_id: str
    """Rows of one experiment series (only parallel/batch/recompute settings change)."""
    reliability: str
    """high | medium | low (data README); keep 'low' out of accuracy figures."""
    model: ModelSpec
    cluster: ClusterSpec
    job: TrainingJob
    layout: Layout
    tokens_per_s_per_gpu: float | None
    step_time_s: float | None
    mfu: float | None
    """As printed (fraction), on the source's own FLOP convention."""
    derivation: str = ""
    """How tokens_per_s_per_gpu was obtained (printed, step_time, tflops basis)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedRow:
    row_id: str
    reason: str


def gpu_slug(gpu_type: str) -> str | None:
    """Catalog slug for the CSV's free-text GPU type ('H100 (DGX-H100)' -> 'h100-sxm-80gb')."""
    t = gpu_type.lower()
    if "a100" in t:
        return "a100-sxm4-40gb" if "40" in t else "a100-sxm4-80gb"
    for key, slug in (  # GB200/GB300 before B200/B300: "gb200" contains "b200"
        ("h100", "h100-sxm-80gb"),
        ("h200", "h200-sxm-141gb"),
        ("h800", "h800-sxm-80gb"),
        ("gb200", "gb200-186gb"),
        ("gb300", "gb300-288gb"),
        ("b200", "b200-sxm-180gb"),
        ("b300", "b300-sxm-288gb"),
        ("mi300x", "mi300x-192gb"),
    ):
        if key in t:
            return slug
    return None


def default_network_bytes_per_s(gpu: GPUSpec) -> float:
    """Per-GPU network of a DGX system of the GPU's generation (catalog-facts §2.4: DGX A100 one
    HDR 200 Gb/s NIC per GPU = 25 GB/s; DGX H100/H200/B200 one NDR 400 Gb/s = 50 GB/s). Callers
    with a catalog pass ``models_db.catalog.network_bytes_per_s`` instead: the preset's figure
    (100 GB/s on the ConnectX-8 systems of B300/GB300)."""
    return 25e9 if gpu.architecture == "ampere" else 50e9


WHOLE_NUMBER_COLUMNS = frozenset((
    "num_gpus", "gpus_per_node", "tp", "pp", "vpp", "cp", "ep", "dp", "micro_batch_size",
    "global_batch_size", "seq_length", "num_layers", "hidden_size", "ffn_hidden_size",
    "num_attention_heads", "num_query_groups", "vocab_size", "num_experts",
    "moe_ffn_hidden_size", "moe_shared_experts", "moe_top_k"))  # fmt: skip
"""Columns read as whole numbers (here and in :mod:`measurement_arch`)."""
NUMBER_COLUMNS = frozenset(("tokens_per_sec_per_gpu", "step_time_s", "tflops_per_gpu", "mfu_pct",
                            "hfu_pct", "moe_imbalance"))  # fmt: skip
"""Columns read as numbers with a fraction."""
NUMBER_EXAMPLES = {"moe_imbalance": "a decimal >= 1.0 such as 1.2 (1.0 is balanced routing)"}
"""What to send in a number column, where "one such as 0.8" would be wrong."""


_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
"""What float() reads as NaN or infinity: a measurement is finite."""


class _Skip(Exception):
    pass


def _float(row: Mapping[str, str], key: str) -> float | None:
    value = (row.get(key) or "").strip()
    if not value:
        return None
    number = read_decimal(value)  # not float(): it reads '1_0' as 10, '٨' as 8, 'inf'
    if number is None:
        example = NUMBER_EXAMPLES.get(key, "one such as 0.8")
        what = "a finite number" if too_large(value) or _NON_FINITE.fullmatch(value) else "a number"
        raise _Skip(
            f"{key}={value!r} is not {what}: send {example} {IN_DECIMAL_DIGITS}, or leave it empty"
        )
    return number


def cell_problem(key: str, text: str) -> str | None:
    """Why ``text`` cannot be the value of the number column ``key`` ('1_0', '٨', 'inf',
    'eight'), naming the column and the accepted form; None where it can (or ``key`` is not a
    number column). Uploads refuse such a row outright rather than store it to skip later."""
    try:
        if key in WHOLE_NUMBER_COLUMNS:
            _int({key: text}, key)
        elif key in NUMBER_COLUMNS:
            _float({key: text}, key)
    except (_Skip, ValueError) as exc:
        return str(exc)
    return None


def _positive(row: Mapping[str, str], key: str) -> float | None:
    """A speed column: missing, or a finite number > 0 (a zero, negative or NaN speed has no
    log, and would make the cluster's level and the fit NaN)."""
    value = _float(row, key)
    if value is not None and not (math.isfinite(value) and value > 0):
        raise _Skip(f"{key}={value} must be a finite positive number (or empty)")
    return value


def _require(row: Mapping[str, str], key: str) -> int:
    value = _int(row, key)
    if value is None:
        raise _Skip(f"{key} is missing")
    return value


def _recompute(text: str, nvidia: bool) -> str:
    t = text.strip().lower()
    if t.startswith("full"):
        return "full"
    if t.startswith("selective"):
        return "selective"
    if t.startswith("none") or t.startswith("no"):
        return "none"
    if not t and nvidia:
        return "none"
    raise _Skip(f"recompute {text!r} is not stated")


def _sequence_parallel(text: str, tp: int) -> bool:
    if tp == 1:
        return False
    t = text.strip().lower()
    # "yes"/"no" as stated; empty follows the README: NVIDIA recipes use SP whenever tp > 1
    return not t.startswith("no")


def _sharding(text: str, source: str) -> str:
    t = text.strip().lower()
    if "zero-3" in t or "zero stage 3" in t:
        return "full"
    if t.startswith("yes") or "zero stage 1" in t or "zero-1" in t:
        return "optimizer"
    if t.startswith("no"):
        return "none"
    return "none" if source in PRE_DISTRIBUTED_OPTIMIZER_SOURCES else "optimizer"


def _flops_per_token(basis: str, model: ModelSpec, seq: int, recompute: str) -> float:
    """FLOPs per token of the paper formulas (megatron-facts §6, Narayanan eq. 3)."""
    b = basis.lower()
    gpt_shaped = (
        not model.gated_linear_unit  # a gated MLP has 3 matrices, not the formula's 2
        and model.query_groups == model.num_attention_heads
        and model.ffn_hidden_size == 4 * model.hidden_size
        and not model.is_moe
    )
    if not gpt_shaped:
        raise _Skip(f"tflops basis {basis!r} cannot be converted for a non-GPT-shaped model")
    lay, h, v = model.num_layers, model.hidden_size, model.vocab_size
    if "hardware" in b or "recompute" in b:
        if recompute != "full":
            raise _Skip("hardware-FLOP basis without full recompute is ambiguous")
        return 96.0 * lay * h * h * (1 + seq / (6 * h) + v / (16 * lay * h))
    if "model flops" in b:
        return 72.0 * lay * h * h * (1 + seq / (6 * h) + v / (12 * lay * h))
    raise _Skip(f"unrecognised tflops basis {basis!r}")


def _tokens_per_s_per_gpu(
    row: Mapping[str, str],
    model: ModelSpec,
    job: TrainingJob,
    num_gpus: int,
    gpu: GPUSpec,
    recompute: str,
) -> tuple[float, str]:
    """The row's throughput as tokens/s per GPU, and how it was derived: printed, from the step
    time, or from TFLOP/s / MFU with the FLOP formula of its basis."""
    seq, gbs = job.seq_length, job.global_batch_size
    tokens = _positive(row, "tokens_per_sec_per_gpu")
    step = _positive(row, "step_time_s")
    if tokens is not None:
        return tokens, "printed"
    if step is not None:
        return gbs * seq / (step * num_gpus), "step_time"
    basis = row.get("tflops_basis") or ""
    tflops = _positive(row, "tflops_per_gpu")
    mfu_pct = _positive(row, "mfu_pct")
    hfu_pct = _positive(row, "hfu_pct")
    if tflops is None and mfu_pct is not None:
        tflops, basis = mfu_pct / 100 * gpu.peak_bf16_flop_per_s / 1e12, "model flops"
    elif tflops is None and hfu_pct is not None:
        tflops = hfu_pct / 100 * gpu.peak_bf16_flop_per_s / 1e12
        basis = basis or "hardware"
    if tflops is None:
        raise _Skip("no throughput (tokens/s, step time, TFLOP/s or MFU)")
    tokens = tflops * 1e12 / _flops_per_token(basis, model, seq, recompute)
    return tokens, f"tflops ({basis.strip()[:40]})"


LAYOUT_STACK_COLUMNS = ("cuda_graphs", "grad_reduce_dtype", "cp_comm_type")
"""Stack settings that are Layout fields (issue 13); STACK_FIELDS are TrainingJob's."""
_BOOL = {"yes": True, "true": True, "on": True, "1": True, "no": False, "false": False,
         "off": False, "0": False}  # fmt: skip


def _stack_columns(row: Mapping[str, str], names: Iterable[str]) -> dict[str, Any]:
    """The stack columns a row states, typed (a wrong value fails the field's validation)."""
    out: dict[str, Any] = {}
    for name in names:
        text = (row.get(name) or "").strip().lower()
        if not text:
            continue
        if name == "tp_comm_overlap":
            if text not in _BOOL:
                raise _Skip(f"tp_comm_overlap={text!r}: use yes or no")
            out[name] = _BOOL[text]
        elif name == "moe_imbalance":  # its range is TrainingJob's check (stack_settings)
            out[name] = _float(row, name)
        else:
            out[name] = text
    return out


def _parse_row(
    row: Mapping[str, str],
    gpu_lookup: Callable[[str], GPUSpec],
    network: Callable[[GPUSpec], float],
    model_lookup: ModelLookup | None = None,
) -> Measurement:
    row_id = (row.get("row_id") or "").strip()
    source = (row.get("source_id") or "").strip()
    nvidia = source in NVIDIA_RECIPE_SOURCES
    slug = gpu_slug(row.get("gpu_type") or "")
    if slug is None:
        raise _Skip(f"unknown gpu_type {row.get('gpu_type')!r}")
    gpu = gpu_lookup(slug)
    model, arch_note = row_model(row, model_lookup)
    num_gpus = _require(row, "num_gpus")
    per_node = _int(row, "gpus_per_node")
    if per_node is None:
        raise _Skip("gpus_per_node is missing")
    tp, pp = _require(row, "tp"), _require(row, "pp")
    cp = _int(row, "cp") or 1
    ep = _int(row, "ep")
    if ep is None:
        if model.is_moe:
            raise _Skip("ep is missing for an MoE model")
        ep = 1
    if num_gpus % (tp * pp * cp):
        raise _Skip(f"num_gpus={num_gpus} is not divisible by tp*pp*cp={tp * pp * cp}")
    dp = num_gpus // (tp * pp * cp)
    stated_dp = _int(row, "dp")
    if stated_dp is not None and stated_dp != dp:
        raise _Skip(f"dp={stated_dp} contradicts num_gpus/(tp*pp*cp)={dp}")
    recompute = _recompute(row.get("recompute") or "", nvidia)
    precision = (row.get("precision") or "").strip().lower()
    if precision.startswith("fp8"):
        prec = "fp8"
    elif precision or gpu.peak_fp8_flop_per_s is None:
        prec = "bf16"
    else:
        raise _Skip("precision is not stated on a GPU with fp8")
    seq = _require(row, "seq_length")
    gbs = _require(row, "global_batch_size")
    vpp = _int(row, "vpp")
    if vpp is None and pp > 1:
        raise _Skip("vpp is not stated with pp > 1 (the pipeline bubble depends on it)")
    layout = Layout(
        tp=tp,
        pp=pp,
        vpp=vpp or 1,
        cp=cp,
        ep=ep,
        dp=dp,
        micro_batch_size=_require(row, "micro_batch_size"),
        recompute=recompute,  # type: ignore[arg-type]
        sequence_parallel=_sequence_parallel(row.get("sequence_parallel") or "", tp),
        optimizer_sharding=_sharding(row.get("distributed_optimizer") or "", source),  # type: ignore[arg-type]
        # Megatron's default (off) unless an optional column says "yes"; no shared row states it
        moe_a2a_overlap=(row.get("moe_a2a_overlap") or "").strip().lower().startswith("yes"),
        # NCCL's alltoall unless an optional column names the flex (DeepEP) dispatcher
        moe_dispatcher=(
            "flex" if (row.get("moe_dispatcher") or "").strip().lower() == "flex" else "alltoall"
        ),
        # --cp-comm-type: Megatron's default p2p (the only type before core 0.10) unless stated
        **({"cp_comm_type": "p2p"} | _stack_columns(row, LAYOUT_STACK_COLUMNS)),
    )
    cluster = ClusterSpec(
        name=f"{slug}x{num_gpus}",
        gpu=gpu,
        num_gpus=num_gpus,
        gpus_per_node=per_node,
        inter_node_bandwidth_bytes_per_s=network(gpu),
    )
    job = TrainingJob(
        seq_length=seq,
        global_batch_size=gbs,
        precision=prec,  # type: ignore[arg-type]
        **_stack_columns(row, STACK_FIELDS),
    )
    step = _positive(row, "step_time_s")
    tokens, derivation = _tokens_per_s_per_gpu(row, model, job, num_gpus, gpu, recompute)
    mfu = _float(row, "mfu_pct")
    return Measurement(
        row_id=row_id,
        source_id=source,
        sweep_id=(row.get("sweep_id") or "").strip(),
        reliability=(row.get("reliability") or "").strip() or "medium",
        model=model,
        cluster=cluster,
        job=job,
        layout=layout,
        tokens_per_s_per_gpu=tokens,
        step_time_s=step,
        mfu=None if mfu is None else mfu / 100,
        derivation=derivation + (f"; {arch_note}" if arch_note else ""),
    )


def parse_rows(
    rows: Iterable[Mapping[str, str]],
    gpu_lookup: Callable[[str], GPUSpec],
    *,
    network_bytes_per_s: Callable[[GPUSpec], float] = default_network_bytes_per_s,
    model_lookup: ModelLookup | None = None,
) -> tuple[list[Measurement], list[SkippedRow]]:
    """Measurements and the rows skipped, each with its reason."""
    out: list[Measurement] = []
    skipped: list[SkippedRow] = []
    for number, row in enumerate(rows, start=1):
        # without a row_id column, the row's position is what a user can find in the file
        row_id = (row.get("row_id") or "").strip() or f"row {number}"
        try:
            out.append(_parse_row(row, gpu_lookup, network_bytes_per_s, model_lookup))
        except (_Skip, ArchSkip, SpecError, ValueError, KeyError) as exc:
            skipped.append(SkippedRow(row_id=row_id, reason=str(exc)))
    return out, skipped


def measurements_from_rows(
    rows: Iterable[Mapping[str, str]],
    gpu_lookup: Callable[[str], GPUSpec],
    *,
    network_bytes_per_s: Callable[[GPUSpec], float] = default_network_bytes_per_s,
    model_lookup: ModelLookup | None = None,
) -> list[Measurement]:
    """Measurements from CSV-style rows (also Megatron-log rows with the same columns)."""
    return parse_rows(
        rows, gpu_lookup, network_bytes_per_s=network_bytes_per_s, model_lookup=model_lookup
    )[0]


def read_rows(path: str | Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))
