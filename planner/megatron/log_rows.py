"""One parsed Megatron-LM log (:class:`LogParseResult`) and its row of the shared measurement CSV.

The row follows log sheet §8. A value the log does not give stays empty; derived values are
named in ``derived_fields``.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from planner.megatron.log_records import (
    MEASUREMENT_COLUMNS,
    IterationRecord,
    LogParseError,
    MemoryRecord,
    SteadyState,
)
from planner.megatron.log_stack import stack_columns
from planner.megatron.parsing import parse_bool, parse_int


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
        gbs = parse_int(self.arguments.get("global_batch_size"))
        interval = parse_int(self.arguments.get("log_interval"))
        prof = (
            parse_int(self.arguments.get("profile_step_start")),
            parse_int(self.arguments.get("profile_step_end")),
        )
        profiling = parse_bool(self.arguments.get("profile")) is True and None not in prof
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
        return [build_row(self)]


def _median_step(recs: list[IterationRecord]) -> int:
    diffs = [b.iteration - a.iteration for a, b in itertools.pairwise(recs)]
    positive = [d for d in diffs if d > 0]
    return int(statistics.median(positive)) if positive else 1


_COPIED_ARGS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                "seq_length", "micro_batch_size", "global_batch_size")  # fmt: skip
_SIZE_ARGS = {  # row column -> (argument, key of the "using world size" line)
              "num_gpus": ("world_size", "world_size"), "tp": ("tensor_model_parallel_size", "tp"),
              "pp": ("pipeline_model_parallel_size", "pp"), "cp": ("context_parallel_size", "cp"),
              "ep": ("expert_model_parallel_size", ""),
              "dp": ("data_parallel_size", "dp")}  # fmt: skip
_EXTRA_ARGS = ("expert_tensor_parallel_size", "log_interval", "recompute_method",
               "recompute_num_layers", "activations_checkpoint_method", "swiglu",
               "normalization", "position_embedding_type", "untie_embeddings_and_output_weights",
               "add_bias_linear", "mtp_num_layers", "quick_geglu", "squared_relu",
               "glu_linear_offset", "activation_func_clamp_value", "window_size",
               "window_attn_skip_freq", "softmax_type")  # fmt: skip
"""Arguments with no CSV column, copied into other_metrics when set."""


def _fmt(x: float) -> str:
    return f"{x:.10g}"


def build_row(res: LogParseResult) -> dict[str, str]:
    """The measurement row (log sheet §8); a value the log does not give stays empty."""
    a, wl = res.arguments, res.world_line
    steady = res.steady_state()
    _check_usable(res, steady)

    def arg(name: str) -> str:
        value = a.get(name, "").strip()
        return "" if value == "None" else value

    derived: list[str] = []
    other: list[str] = [f"megatron_format={res.megatron_format}"]
    notes: list[str] = []
    row = dict.fromkeys(MEASUREMENT_COLUMNS, "")
    for col in _COPIED_ARGS:
        row[col] = arg(col)
    for col, (name, key) in _SIZE_ARGS.items():
        row[col] = arg(name) or (str(wl[key]) if key in wl else "")
        if not row[col] and col in ("cp", "ep") and a and name not in a:
            row[col] = "1"  # the argument predates CP/EP, so the run had none (log sheet §2.3)
            derived.append(f"{col}=1 (no {name} argument: Megatron predates it)")
    n = {c: parse_int(row[c]) for c in ("num_gpus", "tp", "pp", "cp", "dp")}
    if None not in (n["num_gpus"], n["tp"], n["pp"], n["cp"]):
        expect = n["num_gpus"] // (n["tp"] * n["pp"] * n["cp"])  # type: ignore[operator]
        if not row["dp"]:
            row["dp"] = str(expect)
            derived.append(f"dp=world_size/(tp*pp*cp)={expect}")
        elif n["dp"] != expect:
            notes.append(f"printed dp={row['dp']} differs from world/(tp*pp*cp)={expect}")
    row["vpp"] = _vpp(a, derived, notes)
    if parse_bool(a.get("group_query_attention")):
        row["num_query_groups"] = arg("num_query_groups")  # prints 1 without GQA (§2.3)
    if parse_bool(a.get("multi_latent_attention")):
        notes.append("multi-latent attention (q/kv LoRA ranks in the arguments block)")
    if res.padded_vocab_size is not None:
        row["vocab_size"] = str(res.padded_vocab_size)
        notes.append(
            f"vocab_size is the padded vocabulary from the ' > padded vocab' line "
            f"(tokenizer vocabulary {res.tokenizer_vocab_size})"
        )
    elif arg("padded_vocab_size"):
        row["vocab_size"] = arg("padded_vocab_size")
        notes.append("vocab_size is the padded_vocab_size argument")
    if arg("num_experts"):
        _add_moe(arg, row, other, derived, notes)
    row["precision"] = _precision(a)
    row.update(stack_columns(a, derived))  # the software stack (planner.megatron.log_stack)
    if "recompute_granularity" in a:
        row["recompute"] = arg("recompute_granularity") or "none"
    elif "checkpoint_activations" in a:  # 2021 name (log sheet §2.3)
        row["recompute"] = "full" if parse_bool(a["checkpoint_activations"]) else "none"
    for col, name in (
        ("sequence_parallel", "sequence_parallel"),
        ("distributed_optimizer", "use_distributed_optimizer"),
    ):
        flag = parse_bool(a.get(name))
        row[col] = "" if flag is None else ("yes" if flag else "no")
        if a and name not in a:  # v2.6 predates both (log sheet §2.3)
            row[col] = "no"
            derived.append(f"{col}=no (no {name} argument: Megatron predates it)")
    for name in _EXTRA_ARGS:
        if arg(name):  # architecture and schedule details the CSV has no column for
            other.append(f"{name}={arg(name)}")
    if res.num_microbatches is not None:
        other.append(f"num_microbatches={res.num_microbatches}")
    _add_timing(steady, row, other, derived)
    _add_memory(res.memory, other)
    if steady.dropped:
        notes.append(
            "dropped iteration lines: " + ", ".join(f"{k} {v}" for k, v in steady.dropped.items())
        )
    notes.extend(res.warnings)
    row.update(
        row_id=res.source_id,
        source_id=res.source_id,
        source_ref=f"Megatron-LM training log ({res.megatron_format})",
        gpu_type=res.gpu_type or "",
        gpus_per_node="" if res.gpus_per_node is None else str(res.gpus_per_node),
        other_metrics="; ".join(x for x in other if x),
        derived_fields="; ".join(derived),
        arch_source="Megatron-LM arguments block of this log" if a else "",
        reliability="high" if len(steady.kept) >= 2 else "medium",
        notes=". ".join(notes),
    )
    return row


def _check_usable(res: LogParseResult, steady: SteadyState) -> None:
    """Raise :class:`LogParseError` naming what the row needs and the log lacks."""
    missing = []
    if not res.iterations:
        missing.append("iteration lines with 'elapsed time per iteration (ms)'")
    elif not steady.kept:
        why = ", ".join(f"{k}: {v}" for k, v in steady.dropped.items())
        missing.append(f"a usable iteration line after warm-up ({why})")
    if not res.arguments and not res.world_line:
        missing.append("the arguments block (parallel layout and model shape)")
    if missing:
        raise LogParseError("cannot make a measurement row, the log lacks " + "; ".join(missing))


def _add_moe(
    arg: Callable[[str], str],
    row: dict[str, str],
    other: list[str],
    derived: list[str],
    notes: list[str],
) -> None:
    """The MoE columns: experts, top-k, expert FFN, shared experts, A2A overlap, dispatcher."""
    row["num_experts"], row["moe_top_k"] = arg("num_experts"), arg("moe_router_topk")
    row["moe_ffn_hidden_size"] = arg("moe_ffn_hidden_size")
    other.append(f"moe_layer_freq={arg('moe_layer_freq')}" if arg("moe_layer_freq") else "")
    shared = parse_int(arg("moe_shared_expert_intermediate_size"))
    expert = parse_int(row["moe_ffn_hidden_size"])
    if shared and expert and shared % expert == 0:  # the column counts moe_ffn-sized experts
        row["moe_shared_experts"] = str(shared // expert)
        derived.append("moe_shared_experts=moe_shared_expert_intermediate_size/moe_ffn")
    elif shared:
        notes.append(f"shared-expert size {shared} is not a multiple of moe_ffn_hidden_size")
    # the optional columns the loader reads (planner.calibration.measurements); absent ->
    # Megatron's default
    overlap_flag = parse_bool(arg("overlap_moe_expert_parallel_comm") or None)
    if overlap_flag is not None:
        row["moe_a2a_overlap"] = "yes" if overlap_flag else "no"
    if arg("moe_token_dispatcher_type"):
        row["moe_dispatcher"] = arg("moe_token_dispatcher_type")


def _vpp(a: dict[str, str], derived: list[str], notes: list[str]) -> str:
    """Virtual stages per pipeline rank; None means not interleaved (log sheet §2.3, §8)."""
    for name in ("virtual_pipeline_model_parallel_size", "num_virtual_stages_per_pipeline_rank"):
        if (v := parse_int(a.get(name))) is not None:
            return str(v)
    per_stage = parse_int(a.get("num_layers_per_virtual_pipeline_stage"))
    layers, pp = parse_int(a.get("num_layers")), parse_int(a.get("pipeline_model_parallel_size"))
    if per_stage and layers and pp:
        derived.append(
            f"vpp=num_layers/(pp*num_layers_per_virtual_pipeline_stage)"
            f"={layers // (pp * per_stage)}"
        )
        return str(layers // (pp * per_stage))
    if a.get("pipeline_model_parallel_layout", "None") != "None":
        notes.append("vpp not read: set by pipeline_model_parallel_layout")
        return ""
    if "virtual_pipeline_model_parallel_size" in a:
        return "1"
    return ""


def _precision(a: dict[str, str]) -> str:
    if a.get("fp8", "None") not in ("None", "False"):
        return "fp8"
    if a.get("fp4", "None") not in ("None", "False"):
        return "fp4"
    if parse_bool(a.get("bf16")):
        return "bf16"
    if parse_bool(a.get("fp16")):
        return "fp16"
    return "fp32" if "bf16" in a and "fp16" in a else ""


def _add_timing(
    steady: SteadyState, row: dict[str, str], other: list[str], derived: list[str]
) -> None:
    times = [r.elapsed_ms for r in steady.kept]
    step_s = steady.step_time_ms / 1000.0
    row["step_time_s"] = _fmt(step_s)
    other.append(f"step_time_ms_median={_fmt(steady.step_time_ms)}")
    other.append(f"step_time_ms_min={_fmt(min(times))}; step_time_ms_max={_fmt(max(times))}")
    other.append(f"kept_iteration_lines={len(times)}")
    tflops = steady.throughput_tflops_per_gpu
    if tflops is not None:
        row["tflops_per_gpu"] = _fmt(tflops)
        row["tflops_basis"] = (
            "Megatron-LM logged 'throughput per GPU' (model FLOPs; the formula "
            "depends on the Megatron version, log sheet 7.3)"
        )
    gbs = parse_int(row["global_batch_size"]) or steady.kept[-1].global_batch_size
    seq, world = parse_int(row["seq_length"]), parse_int(row["num_gpus"])
    if gbs and seq and world:
        row["tokens_per_sec_per_gpu"] = _fmt(gbs * seq / step_s / world)  # log sheet §7.3
        derived.append("tokens_per_sec_per_gpu=global_batch_size*seq_length/step_time_s/num_gpus")
    losses = steady.kept[-1].losses
    if "lm loss" in losses:
        other.append(f"lm_loss_last_kept={_fmt(losses['lm loss'])}")


def _add_memory(mem: MemoryRecord | None, other: list[str]) -> None:
    if mem is None:
        return
    for kind in ("allocated", "reserved"):
        value, rank = getattr(mem, f"max_{kind}_mib"), getattr(mem, f"max_{kind}_rank")
        if value is not None:
            other.append(f"mem_max_{kind}_mib={_fmt(value)} (rank {rank})")
    for name in ("weight_and_optimizer", "activation", "total"):
        value = getattr(mem, f"theoretical_{name}_mib")
        if value is not None:
            other.append(f"theoretical_{name}_mib={_fmt(value)}")
