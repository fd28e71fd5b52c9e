"""Parse a Megatron-LM training log (the merged stdout of all ranks) into one measurement row.

Formats, version differences and pitfalls are those of the reference sheet
``/work/shared/reference/megatron-log-format.md`` (cited below as "log sheet §N"). The parser is
line-oriented and tolerant: launcher prefixes, ANSI codes, Windows line endings, interleaved
ranks and glued lines are handled; every field except the iteration header and the elapsed time
is optional. The library never guesses a value: what the log does not say stays empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from planner.megatron.log_lines import MAX_LINE_CHARS as MAX_LINE_CHARS  # re-exported
from planner.megatron.log_lines import MAX_LINES as MAX_LINES  # re-exported
from planner.megatron.log_lines import LogLines, timer_line
from planner.megatron.log_records import MEASUREMENT_COLUMNS as MEASUREMENT_COLUMNS  # re-exported
from planner.megatron.log_records import IterationRecord, LogParseError, MemoryRecord, RankMemory
from planner.megatron.log_rows import LogParseResult
from planner.megatron.parsing import parse_float, parse_int, split_pieces

__all__ = [
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MEASUREMENT_COLUMNS",
    "LogParseError",
    "LogParseResult",
    "parse_megatron_log",
]

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
_NOT_A_LOG = (
    "not a Megatron-LM log: found neither an arguments block "
    "('---- arguments ----') nor any 'iteration N/ M |' line"
)
_OLD_TIMERS = re.compile(r"^time \(ms\) \|(.*)$")
_TIMER_HEAD = re.compile(r"(?:\(min, max\) time|max time|times) across ranks \(ms\):\s*$")


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
    fields = split_pieces(body[:cut] if cut >= 0 else body, ": ")
    elapsed = parse_float(fields.get("elapsed time per iteration (ms)", ""))
    if elapsed is None:
        return None
    num = {k: parse_float(v) for k, v in fields.items()}
    stamp = _STAMP.search(line[: match.start()])
    losses = {k: v for k, v in num.items() if "loss" in k and k != "loss scale" and v is not None}
    return IterationRecord(
        iteration=int(match.group(1)),
        train_iters=int(match.group(2)),
        elapsed_ms=elapsed,
        run=run,
        timestamp=stamp.group(1) if stamp else None,
        consumed_samples=parse_int(fields.get("consumed samples")),
        skipped_samples=parse_int(fields.get("skipped samples")),
        throughput_tflops_per_gpu=num.get("throughput per GPU (TFLOP/s/GPU)"),
        learning_rate=num.get("learning rate"),
        global_batch_size=parse_int(fields.get("global batch size")),
        losses=losses,
        loss_scale=num.get("loss scale"),
        grad_norm=num.get("grad norm"),
        skipped_iterations=parse_int(fields.get("number of skipped iterations")),
        nan_iterations=parse_int(fields.get("number of nan iterations")),
        after_eval_or_save=flagged,
        fields=fields,
    )


def _memory(match: re.Match[str]) -> RankMemory:
    scale = 1e9 / _MIB if match.group(3) == "GB" else 1.0  # Megatron-Bridge GB = 1e9 B (§10)
    values = {
        k.removeprefix("mem-").removesuffix("-gigabytes").replace("-", " "): number * scale
        for k, v in split_pieces(match.group(4), ":").items()
        if (number := parse_float(v)) is not None
    }
    return RankMemory(
        rank=int(match.group(1)),
        label=match.group(2),
        allocated_mib=values.get("allocated"),
        max_allocated_mib=values.get("max allocated"),
        reserved_mib=values.get("reserved"),
        max_reserved_mib=values.get("max reserved"),
    )


def _glued_lines(line: str, match: re.Match[str]) -> list[str]:
    """Text glued before and after an iteration line, to be read as lines of their own (§10)."""
    head = _STAMP.sub("", line[: match.start()]).strip()
    tail = line[match.end() :][line[match.end() :].rfind("|") + 1 :]
    return [s for s in (tail, head) if s.strip()]


def _old_timers(match: re.Match[str]) -> dict[str, float]:
    """``time (ms) | name: value | ...`` of old Megatron versions (log sheet §6)."""
    return {
        name: number
        for name, text_value in split_pieces(match.group(1), ": ").items()
        if (number := parse_float(text_value)) is not None
    }


def _memory_record(
    ranks: dict[int, RankMemory], theory: tuple[float | None, float | None, float | None]
) -> MemoryRecord | None:
    """Peaks over ranks (the last report of each) and Megatron's theoretical estimate."""
    if not ranks and theory[0] is None:
        return None
    rank_list = sorted(ranks.values(), key=lambda r: r.rank)
    alloc = [r for r in rank_list if r.max_allocated_mib is not None]
    resv = [r for r in rank_list if r.max_reserved_mib is not None]
    top_a = max(alloc, key=lambda r: r.max_allocated_mib or 0.0) if alloc else None
    top_r = max(resv, key=lambda r: r.max_reserved_mib or 0.0) if resv else None
    return MemoryRecord(
        ranks=tuple(rank_list),
        max_allocated_mib=top_a.max_allocated_mib if top_a else None,
        max_allocated_rank=top_a.rank if top_a else None,
        max_reserved_mib=top_r.max_reserved_mib if top_r else None,
        max_reserved_rank=top_r.rank if top_r else None,
        theoretical_weight_and_optimizer_mib=theory[0],
        theoretical_activation_mib=theory[1],
        theoretical_total_mib=theory[2],
    )


def _closing_warnings(
    *, too_long: int, truncated_args: bool, unparsed: int, blocks: int, iterations: int
) -> list[str]:
    """What the whole log says about its own completeness (log sheet §10)."""
    warnings = []
    if too_long:
        warnings.append(f"{too_long} line(s) over {MAX_LINE_CHARS} characters were skipped")
    if truncated_args:
        warnings.append("the arguments block has no 'end of arguments' line (truncated log?)")
    if unparsed:
        warnings.append(f"{unparsed} unreadable line(s) inside the arguments block were skipped")
    if blocks > 1:
        warnings.append(f"{blocks} start-up blocks (restarts); the last arguments block is used")
    if not iterations:
        warnings.append("no iteration line with an elapsed time: the log has no throughput data")
    return warnings


@dataclass(slots=True)
class _Reading:
    """What the parser has read so far; :meth:`read` takes the log one line at a time."""

    args: dict[str, str] = field(default_factory=dict)
    """The last arguments block (log sheet §2.1)."""
    iterations: list[IterationRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ranks: dict[int, RankMemory] = field(default_factory=dict)
    """The last memory report of each rank (log sheet §5.1)."""
    theory: tuple[float | None, float | None, float | None] = (None, None, None)
    world: dict[str, int] = field(default_factory=dict)
    vocab: tuple[int | None, int | None] = (None, None)
    micro: int | None = None
    timers: dict[int, dict[str, float]] = field(default_factory=dict)
    """Timer values (ms) by the iteration they follow (log sheet §6)."""
    run: int = 0
    """Restarts seen so far: a new arguments block, or an iteration number going down."""
    blocks: int = 0
    in_args: bool = False
    in_timers: bool = False
    flagged: bool = False
    """An evaluation or a checkpoint save came since the last iteration line."""
    unparsed: int = 0
    """Unreadable lines inside the arguments block."""

    def read(self, line: str) -> list[str]:
        """Take one cleaned line; returns the text glued to it, to be read as lines of their own
        (log sheet §10)."""
        if self.in_args:
            if _ARGS_FOOT.search(line):
                self.in_args = False
            elif m := _ARG_LINE.match(line):
                self.args[m.group(1)] = m.group(2).rstrip()
            elif line.strip():
                self.unparsed += 1
            return []
        last_iter = self.iterations[-1].iteration if self.iterations else 0
        if self.in_timers and (timer := timer_line(line)) is not None:
            self.timers.setdefault(last_iter, {})[timer[0]] = timer[1]
            return []
        self.in_timers = False
        if m := _ITER.search(line):
            self._iteration(line, m, last_iter)
            return _glued_lines(line, m)
        if m := _MEM.search(line):
            rec_mem = _memory(m)
            self.ranks.pop(rec_mem.rank, None)
            self.ranks[rec_mem.rank] = rec_mem  # the last report per rank (log sheet §5.1)
        elif m := _THEORY.search(line):
            self.theory = tuple(None if g is None else float(g) for g in m.groups())  # type: ignore[assignment]
        elif m := _VOCAB.search(line):
            self.vocab = (int(m.group(1)), int(m.group(3)))
        elif m := _MICRO.search(line):
            self.micro = int(m.group(1))
        elif m := _WORLD.search(line):
            keys = ("world_size", "dp", "cp", "tp", "pp")
            self.world = {k: int(g) for k, g in zip(keys, m.groups(), strict=True) if g is not None}
        elif _ARGS_HEAD.search(line):
            self.in_args, self.blocks, self.args = True, self.blocks + 1, {}  # the last block wins
            if self.iterations and self.iterations[-1].run == self.run:
                self.run += 1  # a new start-up block after training began: a restart
        elif _EVAL_OR_SAVE.search(line):
            self.flagged = True
        elif _TIMER_HEAD.search(line):
            self.in_timers = True
        elif m := _OLD_TIMERS.match(line.strip()):
            self.timers.setdefault(last_iter, {}).update(_old_timers(m))
        return []

    def _iteration(self, line: str, m: re.Match[str], last_iter: int) -> None:
        rec = _iteration(line, m, self.run, self.flagged)
        if rec is None:
            self.warnings.append(f"iteration {m.group(1)}: no elapsed time, line ignored")
            return
        if self.iterations and self.iterations[-1].run == self.run and rec.iteration <= last_iter:
            self.run += 1  # iteration went down: a restart (log sheet §10)
            rec = _iteration(line, m, self.run, self.flagged)
        if rec is not None:
            self.iterations.append(rec)
        self.flagged = False


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
    state = _Reading()
    reader = LogLines(text, time_budget_s)
    raw_lines = iter(reader)
    pending: list[str] = []  # the pieces of a glued line still to read (log sheet §10)
    while pending or (raw := next(raw_lines, None)) is not None:
        pending.extend(state.read(pending.pop() if pending else _clean(raw or "")))
    if not state.args and not state.iterations:
        raise LogParseError(_NOT_A_LOG)
    warnings = state.warnings + _closing_warnings(
        too_long=reader.too_long,
        truncated_args=state.in_args,
        unparsed=state.unparsed,
        blocks=state.blocks,
        iterations=len(state.iterations),
    )
    return LogParseResult(
        source_id=source_id,
        gpu_type=gpu_type,
        gpus_per_node=gpus_per_node,
        arguments=state.args,
        iterations=state.iterations,
        memory=_memory_record(state.ranks, state.theory),
        warnings=warnings,
        world_line=state.world,
        tokenizer_vocab_size=state.vocab[0],
        padded_vocab_size=state.vocab[1],
        num_microbatches=state.micro,
        timers_ms=state.timers,
    )
