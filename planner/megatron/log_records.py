"""What a Megatron-LM log yields: iteration lines, memory reports, the steady state, the CSV header.

Plain records (log sheet §4, §5, §7); the parser (:mod:`planner.megatron.log`) fills them and the
row builder (:mod:`planner.megatron.log_rows`) turns them into a measurement row.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "row_id", "source_id", "source_ref", "sweep_id", "model_name", "num_layers", "hidden_size",
    "ffn_hidden_size", "num_attention_heads", "num_query_groups", "vocab_size", "seq_length",
    "num_experts", "moe_top_k", "moe_ffn_hidden_size", "moe_shared_experts", "gpu_type",
    "num_gpus", "gpus_per_node", "tp", "pp", "vpp", "cp", "ep", "dp", "micro_batch_size",
    "global_batch_size", "precision", "recompute", "sequence_parallel", "distributed_optimizer",
    "tflops_per_gpu", "tflops_basis", "mfu_pct", "hfu_pct", "tokens_per_sec_per_gpu",
    "step_time_s", "other_metrics", "derived_fields", "arch_source", "reliability", "notes",
)  # fmt: skip
"""Header of /work/shared/data/measured-throughput.csv, in order."""


class LogParseError(ValueError):
    """The text is not a Megatron-LM log, or lacks what a measurement row needs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationRecord:
    """One per-iteration line (log sheet §4): averages over the preceding log interval."""

    iteration: int
    """Iteration number at the end of the interval."""
    train_iters: int
    """``train_iters`` printed after the slash."""
    elapsed_ms: float
    """Mean wall time per iteration over the interval, in milliseconds."""
    run: int = 0
    """Start-up index in the file (0, then 1 after the first restart)."""
    timestamp: str | None = None
    """The last rank's local time, when printed (core 0.6 and later)."""
    consumed_samples: int | None = None
    skipped_samples: int | None = None
    throughput_tflops_per_gpu: float | None = None
    """Megatron's own model-FLOPs rate; its formula depends on the version (log sheet §7.3)."""
    learning_rate: float | None = None
    global_batch_size: int | None = None
    losses: dict[str, float] = field(default_factory=dict)
    """Every ``... loss`` key of the line (``lm loss``, ``z_loss``, ``mtp_1 loss`` ...)."""
    loss_scale: float | None = None
    grad_norm: float | None = None
    skipped_iterations: int | None = None
    nan_iterations: int | None = None
    after_eval_or_save: bool = False
    """An evaluation or checkpoint save happened inside the interval (log sheet §7.2)."""
    fields: dict[str, str] = field(default_factory=dict)
    """Every ``name: value`` piece of the line, raw, including fork-specific ones."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankMemory:
    """The last ``[Rank N] (...) memory`` report of one rank, in MiB (log sheet §5.1)."""

    rank: int
    label: str
    allocated_mib: float | None
    max_allocated_mib: float | None
    reserved_mib: float | None
    max_reserved_mib: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecord:
    """Measured peaks (max over ranks) and Megatron's theoretical estimate, in MiB."""

    ranks: tuple[RankMemory, ...] = ()
    max_allocated_mib: float | None = None
    max_allocated_rank: int | None = None
    max_reserved_mib: float | None = None
    max_reserved_rank: int | None = None
    theoretical_weight_and_optimizer_mib: float | None = None
    theoretical_activation_mib: float | None = None
    theoretical_total_mib: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SteadyState:
    """The iteration lines kept after warm-up and contamination filtering (log sheet §7)."""

    kept: tuple[IterationRecord, ...]
    dropped: dict[str, int]
    """Reason -> number of lines dropped for it."""

    @property
    def step_time_ms(self) -> float:
        """Median elapsed time per iteration of the kept lines (log sheet §7.1)."""
        return float(statistics.median(r.elapsed_ms for r in self.kept))

    @property
    def throughput_tflops_per_gpu(self) -> float | None:
        """Median of the logged throughput of the kept lines, when every kept line has one."""
        values = [r.throughput_tflops_per_gpu for r in self.kept]
        clean = [v for v in values if v is not None]
        return float(statistics.median(clean)) if clean and len(clean) == len(values) else None
