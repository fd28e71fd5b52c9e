"""Parse a Megatron-LM training log (the merged stdout of all ranks) into one measurement row.

Formats, version differences and pitfalls are those of the reference sheet
``/work/shared/reference/megatron-log-format.md`` (cited below as "log sheet §N"). The parser is
line-oriented and tolerant: launcher prefixes, ANSI codes, Windows line endings, interleaved
ranks and glued lines are handled; every field except the iteration header and the elapsed time
is optional. The library never guesses a value: what the log does not say stays empty.
"""

from __future__ import annotations

import itertools
import re
import statistics
import time
from collections.abc import Iterator
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

_MIB = 1024**2  # Megatron's "MB" is MiB (log sheet §5.1)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PREFIXES = (  # launcher and collector prefixes (log sheet §10)
    re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s"),
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:"),
    re.compile(r"^\[[A-Za-z_]+\d+\]:"),
    re.compile(r"^(?:INFO|WARNING|DEBUG|ERROR|CRITICAL):[\w.]+:"),
    re.compile(r"^[A-Za-z0-9][\w.-]*: "),
)
# Every pattern below runs on untrusted uploads, so each is linear in the line's length: fixed
# counts instead of `-{10,}` around a literal (searching `-{10,} x` backtracks quadratically on a
# run of dashes), no lazy group before `\s*$` (values are right-stripped in code instead), and
# `[^()]*` for the memory label so that each candidate's scan stops at the next candidate.
_ARGS_HEAD = re.compile(r"-{10} arguments -{10}")
_ARGS_FOOT = re.compile(r"-{10} end of arguments -{10}")
_ARG_LINE = re.compile(r"^ {2}(\w+) \.* ?(.*)$")  # log sheet §2.1
_ITER = re.compile(r"iteration\s+(\d+)/\s*(\d+)\s*\|")  # log sheet §4.2
_STAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?)\]\s*$")
_MEM = re.compile(r"\[Rank (\d+)\] \(([^()]*)\) memory \((MB|GB)\) \|(.*)$")
_AFTER = re.compile(r"after (\d+) iterations")
_THEORY = re.compile(
    r"Theoretical memory footprints: weight and optimizer=([0-9.]+) MB"
    r"(?:, activation=([0-9.]+) MB, total=([0-9.]+) MB)?"
)
_VOCAB = re.compile(r"> padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\)")
_MICRO = re.compile(r"setting number of micro-?batches to constant (\d+)")
_WORLD = re.compile(
    r"using world size: (\d+), data-parallel[- ]size: (\d+),"
    r"(?: context-parallel size: (\d+),?)?.*?tensor-model-parallel size: (\d+), "
    r"pipeline-model-parallel size: (\d+)"
)
_EVAL_OR_SAVE = re.compile(r"validation(?:-\S+)? loss at|saving checkpoint at iteration")
_OLD_TIMERS = re.compile(r"^time \(ms\) \|(.*)$")
_TIMER_HEAD = re.compile(r"(?:\(min, max\) time|max time|times) across ranks \(ms\):\s*$")
_TIMER_VALUE = re.compile(r"\(?([0-9.]+)(?:, ([0-9.]+)\))?\s*")  # after "name ....: "
_BLANK_RUN = re.compile(r"\n[ \t\r\n]*\n")  # one backtrack per run: linear; keeps indentation
MAX_LINE_CHARS = 16_384
"""Longer lines are skipped with a warning: no Megatron-LM line comes near this, and the cap
bounds the work any one line can cost."""
MAX_LINES = 500_000
"""More non-blank lines than this is not one training run's log (about 200 bytes a line)."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class LogParseResult:
    """Everything read from one log; :meth:`to_measurement_rows` makes the CSV row."""

    source_id: str
    gpu_type: str | None
    gpus_per_node: int | None
    arguments: dict[str, str]
    """The (last) arguments block, name -> printed value (log sheet §2)."""
    iterations: list[IterationRecord]
    memory: MemoryRecord | None
    warnings: list[str]
    world_line: dict[str, int] = field(default_factory=dict)
    """Sizes from the ``using world size: ...`` line (world, dp, cp, tp, pp)."""
    tokenizer_vocab_size: int | None = None
    padded_vocab_size: int | None = None
    num_microbatches: int | None = None
    timers_ms: dict[int, dict[str, float]] = field(default_factory=dict)
    """Iteration -> timer name -> ms (the max across ranks); 0 holds the setup timers."""

    @property
    def megatron_format(self) -> str:
        """Version family inferred from the iteration-line style (log sheet §4.2)."""
        stamps = [r.timestamp for r in self.iterations if r.timestamp]
        if not self.iterations:
            return "unknown"
        if not stamps:
            return "v2.x-core0.5 (no timestamp)"
        return "core>=0.16" if any("." in s for s in stamps) else "core0.6-0.15"

    def steady_state(self) -> SteadyState:
        """Drop warm-up and contaminated lines, per run (log sheet §7.1, §7.2)."""
        dropped: dict[str, int] = {}
        kept: list[IterationRecord] = []
        gbs = _int(self.arguments.get("global_batch_size"))
        interval = _int(self.arguments.get("log_interval"))
        prof = (
            _int(self.arguments.get("profile_step_start")),
            _int(self.arguments.get("profile_step_end")),
        )
        profiling = _bool(self.arguments.get("profile")) is True and None not in prof
        for run in sorted({r.run for r in self.iterations}):
            recs = [r for r in self.iterations if r.run == run]
            step = interval or _median_step(recs)
            for i, rec in enumerate(recs):
                start = rec.iteration - step + 1
                reason = None
                if i < 2 or rec.iteration <= recs[0].iteration + step:
                    reason = "warm-up"
                elif rec.skipped_iterations or rec.nan_iterations:
                    reason = "skipped or nan iterations"
                elif gbs is not None and rec.global_batch_size not in (None, gbs):
                    reason = "batch-size ramp-up"
                elif rec.after_eval_or_save and rec.timestamp is None:
                    reason = "evaluation or checkpoint inside the interval"
                elif profiling and start <= (prof[1] or 0) and rec.iteration >= (prof[0] or 0):
                    reason = "profiling"
                elif rec.elapsed_ms != rec.elapsed_ms:
                    reason = "nan elapsed time"
                if reason is None:
                    kept.append(rec)
                else:
                    dropped[reason] = dropped.get(reason, 0) + 1
        return SteadyState(kept=tuple(kept), dropped=dropped)

    def to_measurement_rows(self) -> list[dict[str, str]]:
        """One row with the columns of measured-throughput.csv; raises when the log lacks data."""
        from planner.megatron_log_rows import build_row  # the row builder needs this class

        return [build_row(self)]


def _int(value: str | None) -> int | None:
    if value is None or not re.fullmatch(r"-?\d+", value.strip()):
        return None
    return int(value)


def _bool(value: str | None) -> bool | None:
    return {"True": True, "False": False}.get((value or "").strip())


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _pieces(text: str, sep: str) -> dict[str, str]:
    """``a: 1 | b c: 2`` -> {"a": "1", "b c": "2"}, splitting each piece at its last ``sep``."""
    out: dict[str, str] = {}
    for piece in text.split("|"):
        name, found, value = piece.strip().rpartition(sep)
        if found:
            out[name.strip()] = value.strip()
    return out


def _median_step(recs: list[IterationRecord]) -> int:
    diffs = [b.iteration - a.iteration for a, b in itertools.pairwise(recs)]
    positive = [d for d in diffs if d > 0]
    return int(statistics.median(positive)) if positive else 1


def _clean(line: str) -> str:
    line = _ANSI.sub("", line)
    for _ in range(4):
        for pattern in _PREFIXES:
            stripped = pattern.sub("", line, count=1)
            if stripped != line:
                line = stripped
                break
        else:
            break
    return line


def _iteration(line: str, match: re.Match[str], run: int, flagged: bool) -> IterationRecord | None:
    body = line[match.end() :]
    cut = body.rfind("|")
    fields = _pieces(body[:cut] if cut >= 0 else body, ": ")
    elapsed = _float(fields.get("elapsed time per iteration (ms)", ""))
    if elapsed is None:
        return None
    num = {k: _float(v) for k, v in fields.items()}
    stamp = _STAMP.search(line[: match.start()])
    losses = {k: v for k, v in num.items() if "loss" in k and k != "loss scale" and v is not None}
    return IterationRecord(
        iteration=int(match.group(1)),
        train_iters=int(match.group(2)),
        elapsed_ms=elapsed,
        run=run,
        timestamp=stamp.group(1) if stamp else None,
        consumed_samples=_int(fields.get("consumed samples")),
        skipped_samples=_int(fields.get("skipped samples")),
        throughput_tflops_per_gpu=num.get("throughput per GPU (TFLOP/s/GPU)"),
        learning_rate=num.get("learning rate"),
        global_batch_size=_int(fields.get("global batch size")),
        losses=losses,
        loss_scale=num.get("loss scale"),
        grad_norm=num.get("grad norm"),
        skipped_iterations=_int(fields.get("number of skipped iterations")),
        nan_iterations=_int(fields.get("number of nan iterations")),
        after_eval_or_save=flagged,
        fields=fields,
    )


def _lines(text: str, time_budget_s: float | None, chunk: int = 2**20) -> Iterator[str]:
    """``text.splitlines()`` read a chunk at a time, runs of blank lines collapsed into one.

    Raises :class:`LogParseError` past :data:`MAX_LINES` lines or the time budget: the cheap
    checks that keep an 8 MB upload of newlines or of one-character lines from costing seconds.
    """
    deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
    chunks: list[str] = []
    start = 0
    while start < len(text):  # cut after a newline, so no line (nor a CR LF pair) is split
        end = text.find("\n", start + chunk)
        end = len(text) if end < 0 else end + 1
        chunks.append(_BLANK_RUN.sub("\n\n", text[start:end]))
        start = end
    if sum(c.count("\n") for c in chunks) > MAX_LINES:  # counted before any line is parsed
        raise LogParseError(
            f"the log has more than {MAX_LINES} lines; upload the part with the arguments "
            "block and the iteration lines you want measured"
        )
    for piece in chunks:
        for i, line in enumerate(piece.splitlines()):
            if deadline is not None and i % 1024 == 0 and time.monotonic() > deadline:
                raise LogParseError(
                    f"the log took longer than {time_budget_s:g} s to read; upload a shorter "
                    "part (the arguments block and the iteration lines you want measured)"
                )
            yield line


def _timer_line(line: str) -> tuple[str, float] | None:
    """``   name ......: (min, max)`` or ``   name ...: max`` -> (name, max) (log sheet §6).

    Split at the last ``": "`` in code rather than with a lazy regex, which backtracks
    quadratically on long runs of dots and digits."""
    head, sep, value = line.rpartition(": ")
    if not sep or not head[:1].isspace():
        return None
    dotted = head.rstrip(".")
    name = dotted.strip()
    match = _TIMER_VALUE.fullmatch(value)
    if not name or not dotted.endswith(" ") or match is None:
        return None
    number = _float(match.group(2) or match.group(1))
    return None if number is None else (name, number)


def _memory(match: re.Match[str]) -> RankMemory:
    scale = 1e9 / _MIB if match.group(3) == "GB" else 1.0  # Megatron-Bridge GB = 1e9 B (§10)
    values = {
        k.removeprefix("mem-").removesuffix("-gigabytes").replace("-", " "): number * scale
        for k, v in _pieces(match.group(4), ":").items()
        if (number := _float(v)) is not None
    }
    return RankMemory(
        rank=int(match.group(1)),
        label=match.group(2),
        allocated_mib=values.get("allocated"),
        max_allocated_mib=values.get("max allocated"),
        reserved_mib=values.get("reserved"),
        max_reserved_mib=values.get("max reserved"),
    )


def parse_megatron_log(
    text: str,
    *,
    source_id: str = "megatron-log",
    gpu_type: str | None = None,
    gpus_per_node: int | None = None,
    time_budget_s: float | None = None,
) -> LogParseResult:
    """Parse a Megatron-LM stdout log; raises :class:`LogParseError` if it is not one.

    ``gpu_type`` and ``gpus_per_node`` are stored as given (logs rarely print them). A log of
    more than :data:`MAX_LINES` non-blank lines, or one that takes longer than ``time_budget_s``
    to read, is refused with :class:`LogParseError` (a service bounds untrusted uploads so).
    """
    args: dict[str, str] = {}
    blocks = 0
    iterations: list[IterationRecord] = []
    warnings: list[str] = []
    ranks: dict[int, RankMemory] = {}
    theory: tuple[float | None, float | None, float | None] = (None, None, None)
    world: dict[str, int] = {}
    vocab: tuple[int | None, int | None] = (None, None)
    micro: int | None = None
    timers: dict[int, dict[str, float]] = {}
    run, in_args, in_timers, flagged, unparsed, too_long = 0, False, False, False, 0, 0
    raw_lines = _lines(text, time_budget_s)
    pending: list[str] = []  # the pieces of a glued line still to read (log sheet §10)
    while True:
        if not pending:
            raw = next(raw_lines, None)
            if raw is None:
                break
            if len(raw) > MAX_LINE_CHARS:
                too_long += 1
                continue
            if not raw or raw.isspace():  # a blank line only ends a timer block
                in_timers = False
                continue
            pending.append(_clean(raw))
        line = pending.pop()
        if in_args:
            if _ARGS_FOOT.search(line):
                in_args = False
            elif m := _ARG_LINE.match(line):
                args[m.group(1)] = m.group(2).rstrip()
            elif line.strip():
                unparsed += 1
            continue
        last_iter = iterations[-1].iteration if iterations else 0
        if in_timers and (timer := _timer_line(line)) is not None:
            timers.setdefault(last_iter, {})[timer[0]] = timer[1]
            continue
        in_timers = False
        if m := _ITER.search(line):
            head = _STAMP.sub("", line[: m.start()]).strip()
            tail = line[m.end() :][line[m.end() :].rfind("|") + 1 :]
            pending.extend(s for s in (tail, head) if s.strip())  # glued lines (§10)
            rec = _iteration(line, m, run, flagged)
            if rec is None:
                warnings.append(f"iteration {m.group(1)}: no elapsed time, line ignored")
                continue
            if iterations and iterations[-1].run == run and rec.iteration <= last_iter:
                run += 1  # iteration went down: a restart (log sheet §10)
                rec = _iteration(line, m, run, flagged)
            if rec is not None:
                iterations.append(rec)
            flagged = False
        elif m := _MEM.search(line):
            rec_mem = _memory(m)
            ranks.pop(rec_mem.rank, None)
            ranks[rec_mem.rank] = rec_mem  # the last report per rank (log sheet §5.1)
        elif m := _THEORY.search(line):
            theory = tuple(None if g is None else float(g) for g in m.groups())  # type: ignore[assignment]
        elif m := _VOCAB.search(line):
            vocab = (int(m.group(1)), int(m.group(3)))
        elif m := _MICRO.search(line):
            micro = int(m.group(1))
        elif m := _WORLD.search(line):
            keys = ("world_size", "dp", "cp", "tp", "pp")
            world = {k: int(g) for k, g in zip(keys, m.groups(), strict=True) if g is not None}
        elif _ARGS_HEAD.search(line):
            in_args, blocks, args = True, blocks + 1, {}  # the last block wins
            if iterations and iterations[-1].run == run:
                run += 1  # a new start-up block after training began: a restart
        elif _EVAL_OR_SAVE.search(line):
            flagged = True
        elif _TIMER_HEAD.search(line):
            in_timers = True
        elif m := _OLD_TIMERS.match(line.strip()):
            for name, text_value in _pieces(m.group(1), ": ").items():
                if (number := _float(text_value)) is not None:
                    timers.setdefault(last_iter, {})[name] = number
    if not args and not iterations:
        raise LogParseError(
            "not a Megatron-LM log: found neither an arguments block "
            "('---- arguments ----') nor any 'iteration N/ M |' line"
        )
    if too_long:
        warnings.append(f"{too_long} line(s) over {MAX_LINE_CHARS} characters were skipped")
    if in_args:
        warnings.append("the arguments block has no 'end of arguments' line (truncated log?)")
    if unparsed:
        warnings.append(f"{unparsed} unreadable line(s) inside the arguments block were skipped")
    if blocks > 1:
        warnings.append(f"{blocks} start-up blocks (restarts); the last arguments block is used")
    if not iterations:
        warnings.append("no iteration line with an elapsed time: the log has no throughput data")
    memory = None
    if ranks or theory[0] is not None:
        rank_list = sorted(ranks.values(), key=lambda r: r.rank)
        alloc = [r for r in rank_list if r.max_allocated_mib is not None]
        resv = [r for r in rank_list if r.max_reserved_mib is not None]
        top_a = max(alloc, key=lambda r: r.max_allocated_mib or 0.0) if alloc else None
        top_r = max(resv, key=lambda r: r.max_reserved_mib or 0.0) if resv else None
        memory = MemoryRecord(
            ranks=tuple(rank_list),
            max_allocated_mib=top_a.max_allocated_mib if top_a else None,
            max_allocated_rank=top_a.rank if top_a else None,
            max_reserved_mib=top_r.max_reserved_mib if top_r else None,
            max_reserved_rank=top_r.rank if top_r else None,
            theoretical_weight_and_optimizer_mib=theory[0],
            theoretical_activation_mib=theory[1],
            theoretical_total_mib=theory[2],
        )
    return LogParseResult(
        source_id=source_id,
        gpu_type=gpu_type,
        gpus_per_node=gpus_per_node,
        arguments=args,
        iterations=iterations,
        memory=memory,
        warnings=warnings,
        world_line=world,
        tokenizer_vocab_size=vocab[0],
        padded_vocab_size=vocab[1],
        num_microbatches=micro,
        timers_ms=timers,
    )
