"""Tests for the Megatron-LM log parser, on synthetic logs written from the format sheet.

Expected numbers are read off the fixture text by hand (and, for the main-format fixture, off
megatron-log-format.md §11), not computed by the parser.
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from planner.megatron.log import MEASUREMENT_COLUMNS, LogParseError, parse_megatron_log

LOGS = Path(__file__).parents[1] / "data" / "megatron_logs"
SHARED_CSV = Path("/work/shared/data/measured-throughput.csv")
MAIN = (LOGS / "core_0_19_llama8b.log").read_text()
MOE = (LOGS / "core_0_6_mixtral_moe.log").read_text()
OLD = (LOGS / "v2_6_gpt345m.log").read_text()
HEADER = "------------------------ arguments ------------------------"
FOOTER = "-------------------- end of arguments ---------------------"


def row_of(text: str, **kwargs: object) -> dict[str, str]:
    rows = parse_megatron_log(text, **kwargs).to_measurement_rows()  # type: ignore[arg-type]
    assert len(rows) == 1
    return rows[0]


def test_main_format_layout_fields_match_sheet_section_11() -> None:
    row = row_of(MAIN)
    got = {k: row[k] for k in ("tp", "pp", "vpp", "cp", "ep", "dp", "num_gpus")}
    assert got == {"tp": "2", "pp": "2", "vpp": "2", "cp": "1", "ep": "1", "dp": "4",
                   "num_gpus": "16"}  # fmt: skip


def test_main_format_model_and_job_fields_match_sheet_section_11() -> None:
    row = row_of(MAIN)
    keys = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
            "num_query_groups", "vocab_size", "seq_length", "micro_batch_size",
            "global_batch_size", "precision", "recompute", "sequence_parallel",
            "distributed_optimizer", "num_experts", "moe_top_k")  # fmt: skip
    assert [row[k] for k in keys] == ["32", "4096", "14336", "32", "8", "128256", "8192", "1",
                                      "128", "bf16", "none", "yes", "yes", "", ""]  # fmt: skip


def test_main_format_step_time_is_median_of_iterations_20_and_30() -> None:
    row = row_of(MAIN)
    assert float(row["step_time_s"]) == pytest.approx(11.48455)  # (11492.3 + 11476.8) / 2 ms


def test_main_format_tokens_per_second_per_gpu_is_derived_from_step_time() -> None:
    row = row_of(MAIN)
    assert float(row["tokens_per_sec_per_gpu"]) == pytest.approx(128 * 8192 / 11.48455 / 16)
    assert "tokens_per_sec_per_gpu" in row["derived_fields"]


def test_main_format_logged_throughput_is_median_of_kept_lines() -> None:
    assert float(row_of(MAIN)["tflops_per_gpu"]) == pytest.approx((293.5 + 293.9) / 2)


def test_warm_up_lines_1_and_10_are_dropped() -> None:
    steady = parse_megatron_log(MAIN).steady_state()
    assert [r.iteration for r in steady.kept] == [20, 30]
    assert steady.dropped == {"warm-up": 2}


def test_memory_peak_is_max_over_last_report_per_rank() -> None:
    mem = parse_megatron_log(MAIN).memory
    assert mem is not None
    assert (mem.max_allocated_mib, mem.max_allocated_rank) == (41240.03, 1)
    assert mem.max_reserved_mib == 45056.0
    assert {r.rank: r.label for r in mem.ranks}[8] == "after 10 iterations"


def test_theoretical_memory_line_is_read() -> None:
    mem = parse_megatron_log(MAIN).memory
    assert mem is not None
    got = (mem.theoretical_weight_and_optimizer_mib, mem.theoretical_activation_mib,
           mem.theoretical_total_mib)  # fmt: skip
    assert got == (17231.64, 29652.16, 46883.81)


def test_iteration_record_fields_are_parsed() -> None:
    rec = parse_megatron_log(MAIN).iterations[2]
    assert rec.iteration == 20 and rec.train_iters == 1000
    assert rec.consumed_samples == 2560 and rec.global_batch_size == 128
    assert rec.learning_rate == pytest.approx(6e-5)
    assert rec.losses == {"lm loss": pytest.approx(8.981344)}
    assert rec.grad_norm == pytest.approx(1.874)
    assert rec.timestamp == "2026-08-24 09:17:45.836012"


def test_arguments_block_keeps_long_names_without_dots_and_list_values() -> None:
    args = parse_megatron_log(MAIN).arguments
    assert args["inference_dynamic_batching_prefix_caching_coordinator_policy"] == "load_balanced"
    assert args["cp_comm_type"] == "['p2p']"
    assert len(args) == 37


def test_row_keys_equal_shared_csv_header() -> None:
    with SHARED_CSV.open(newline="") as fh:
        header = next(csv.reader(fh))
    keys = list(row_of(MAIN))
    assert keys[: len(header)] == header
    # then only the optional columns the loader reads: the software stack (log_stack)
    assert set(keys[len(header) :]) <= {"tp_comm_overlap", "attention_backend",
                                        "cross_entropy_fusion", "moe_imbalance",
                                        "cuda_graphs", "grad_reduce_dtype",
                                        "cp_comm_type", "megatron_core_version"}  # fmt: skip
    assert list(MEASUREMENT_COLUMNS) == header


def test_gpu_type_and_gpus_per_node_are_stored_as_given() -> None:
    row = row_of(MAIN, gpu_type="H100-SXM5-80GB", gpus_per_node=8)
    assert (row["gpu_type"], row["gpus_per_node"]) == ("H100-SXM5-80GB", "8")
    assert row_of(MAIN)["gpu_type"] == ""


def test_row_uses_source_id() -> None:
    row = row_of(MAIN, source_id="my-run-42")
    assert (row["source_id"], row["row_id"]) == ("my-run-42", "my-run-42")


def test_moe_log_reads_experts_and_expert_parallelism() -> None:
    row = row_of(MOE)
    got = [row[k] for k in ("num_experts", "moe_top_k", "ep", "dp", "tp", "pp", "recompute")]
    assert got == ["8", "2", "4", "8", "2", "1", "selective"]


def test_moe_log_drops_warm_up_and_skipped_interval() -> None:
    steady = parse_megatron_log(MOE).steady_state()
    assert [r.iteration for r in steady.kept] == [30, 50, 60]
    assert steady.step_time_ms == pytest.approx(5361.6)


def test_moe_log_strips_torchrun_prefix_and_ansi_codes() -> None:
    result = parse_megatron_log(MOE)
    assert result.arguments["tensor_model_parallel_size"] == "2"
    assert [r.iteration for r in result.iterations] == [10, 20, 30, 40, 50, 60]


def test_moe_log_reads_load_balancing_loss() -> None:
    rec = parse_megatron_log(MOE).iterations[0]
    assert rec.losses["load_balancing_loss"] == pytest.approx(1.013377)
    assert rec.throughput_tflops_per_gpu == pytest.approx(213.4)


def test_2021_log_reads_old_argument_names() -> None:
    row = row_of(OLD)
    got = [row[k] for k in ("precision", "recompute", "cp", "ep", "vpp", "dp", "vocab_size")]
    assert got == ["fp16", "full", "1", "1", "1", "2", "50432"]
    assert "cp=1" in row["derived_fields"]


def test_2021_log_without_gqa_leaves_query_groups_empty() -> None:
    assert row_of(OLD)["num_query_groups"] == ""


def test_2021_log_drops_interval_after_evaluation_and_skipped_iterations() -> None:
    steady = parse_megatron_log(OLD).steady_state()
    assert [r.iteration for r in steady.kept] == [300, 500]
    assert float(row_of(OLD)["step_time_s"]) == pytest.approx(1.84415)


def test_2021_skipped_iteration_without_grad_norm_is_parsed() -> None:
    rec = parse_megatron_log(OLD).iterations[-1]
    assert (rec.grad_norm, rec.skipped_iterations, rec.loss_scale) == (None, 16, 65536.0)


def test_2021_one_line_timers_attach_to_the_preceding_iteration() -> None:
    timers = parse_megatron_log(OLD).timers_ms
    assert timers[200]["forward-compute"] == 701.22
    assert timers[0]["model-and-optimizer-setup"] == 1736.32


def test_2021_log_has_no_throughput_field() -> None:
    row = row_of(OLD)
    assert (row["tflops_per_gpu"], row["tflops_basis"]) == ("", "")


def test_min_max_timer_block_keeps_the_max_across_ranks() -> None:
    timers = parse_megatron_log(MAIN).timers_ms
    assert timers[0] == {"model-and-optimizer-setup": 5391.02,
                         "train/valid/test-data-iterators-setup": 1744.90}  # fmt: skip


def test_2021_log_predates_sequence_parallel_and_distributed_optimizer() -> None:
    row = row_of(OLD)
    assert (row["sequence_parallel"], row["distributed_optimizer"]) == ("no", "no")


def test_shared_expert_size_becomes_a_count_of_expert_sized_experts() -> None:
    moe = MOE.replace(
        "[default0]:  num_experts ..................................... 8\n",
        "[default0]:  num_experts ..................................... 8\n"
        "[default0]:  moe_ffn_hidden_size ............................. 1408\n"
        "[default0]:  moe_shared_expert_intermediate_size ............. 2816\n",
    )
    row = row_of(moe)
    assert (row["moe_ffn_hidden_size"], row["moe_shared_experts"]) == ("1408", "2")


def test_windows_line_endings_give_the_same_row() -> None:
    assert row_of(OLD.replace("\n", "\r\n")) == row_of(OLD)


def test_launcher_prefixes_give_the_same_row() -> None:
    prefixed = "".join(f"3: node017: {line}\n" for line in MAIN.splitlines())
    assert row_of(prefixed) == row_of(MAIN)


def test_glued_lines_are_split() -> None:
    glued = MAIN.replace(
        "number of nan iterations:   0 |\nNumber of parameters in transformer block",
        "number of nan iterations:   0 |Number of parameters in transformer block",
    ).replace(
        "max reserved: 45056.00\n [2026-08-24 09:17:45.836012]",
        "max reserved: 45056.00 [2026-08-24 09:17:45.836012]",
    )
    assert glued != MAIN
    result = parse_megatron_log(glued)
    assert [r.iteration for r in result.iterations] == [1, 10, 20, 30]
    assert result.memory is not None and {r.rank for r in result.memory.ranks} == {0, 1, 8, 9}


def test_restart_starts_a_new_warm_up() -> None:
    lines = [ln for ln in MAIN.splitlines() if " iteration " in ln and "/    1000" in ln]
    resumed = MAIN + "\n" + "\n".join(lines[2:]).replace("11476.8", "11400.0") + "\n"
    result = parse_megatron_log(resumed)
    assert [r.run for r in result.iterations] == [0, 0, 0, 0, 1, 1]
    assert [r.elapsed_ms for r in result.steady_state().kept] == [11492.3, 11476.8]


def test_batch_size_ramp_up_lines_are_dropped() -> None:
    ramp = MAIN.replace(
        "elapsed time per iteration (ms): 11476.8 | throughput per GPU (TFLOP/s/GPU): 293.9 | "
        "learning rate: 9.000000E-05 | global batch size:   128",
        "elapsed time per iteration (ms): 11476.8 | throughput per GPU (TFLOP/s/GPU): 293.9 | "
        "learning rate: 9.000000E-05 | global batch size:    64",
    )
    steady = parse_megatron_log(ramp).steady_state()
    assert [r.iteration for r in steady.kept] == [20]
    assert steady.dropped["batch-size ramp-up"] == 1


def test_single_kept_line_gives_medium_reliability() -> None:
    steady_old = row_of(OLD)["reliability"]
    one = MAIN.rsplit("\n", 2)[0] + "\n"  # drop iteration 30
    assert (row_of(one)["reliability"], steady_old) == ("medium", "high")


def test_non_log_text_raises_clear_error() -> None:
    with pytest.raises(LogParseError, match="not a Megatron-LM log"):
        parse_megatron_log("Epoch 1/10\nloss: 0.31 - accuracy: 0.92\n")


def test_arguments_only_log_warns_and_cannot_make_a_row() -> None:
    head = MAIN.split(FOOTER)[0] + FOOTER + "\n"
    result = parse_megatron_log(head)
    assert result.arguments["world_size"] == "16"
    assert any("no iteration line" in w for w in result.warnings)
    with pytest.raises(LogParseError, match="lacks iteration lines"):
        result.to_measurement_rows()


def test_only_warm_up_lines_cannot_make_a_row() -> None:
    early = MAIN.split(" [2026-08-24 09:17:45.836012]")[0]
    with pytest.raises(LogParseError, match=r"usable iteration line after warm-up.*warm-up: 2"):
        parse_megatron_log(early).to_measurement_rows()


def test_iterations_without_arguments_cannot_make_a_row() -> None:
    lines = "\n".join(ln for ln in MAIN.splitlines() if "iteration  " in ln)
    with pytest.raises(LogParseError, match="arguments block"):
        parse_megatron_log(lines).to_measurement_rows()


def test_truncated_arguments_block_warns() -> None:
    result = parse_megatron_log(MAIN.split(FOOTER)[0])
    assert any("end of arguments" in w for w in result.warnings)


def test_megatron_bridge_gigabyte_memory_is_converted_to_mib() -> None:
    text = (
        f"{HEADER}\n  world_size ...................................... 8\n{FOOTER}\n"
        "[Rank 0] (after 1 iterations) memory (GB) | mem-allocated-gigabytes: 51.072 | "
        "mem-max-allocated-gigabytes: 60.0 | mem-reserved-gigabytes: 62.0\n"
    )
    mem = parse_megatron_log(text).memory
    assert mem is not None
    assert mem.max_allocated_mib == pytest.approx(60.0e9 / 1024**2)


def test_restart_with_new_arguments_block_uses_the_last_block() -> None:
    second = MAIN.replace("micro_batch_size ................................ 1",
                          "micro_batch_size ................................ 2")  # fmt: skip
    result = parse_megatron_log(MAIN + second)
    assert result.arguments["micro_batch_size"] == "2"
    assert {r.run for r in result.iterations} == {0, 1}
    assert any("2 start-up blocks" in w for w in result.warnings)


@pytest.mark.skipif(
    importlib.util.find_spec("planner.calibration.measurements") is None
    or importlib.util.find_spec("models_db") is None,
    reason="planner.calibration.measurements or the catalog is not written yet",
)
def test_rows_load_through_measurements_module() -> None:
    from models_db.catalog import load_gpu
    from planner.calibration.measurements import parse_rows

    rows = [row_of(MAIN, gpu_type="H100-SXM5-80GB", gpus_per_node=8)]
    loaded, skipped = parse_rows(rows, load_gpu)
    assert skipped == []
    m = loaded[0]
    assert (m.layout.tp, m.layout.pp, m.layout.vpp, m.layout.dp) == (2, 2, 2, 4)
    assert (m.model.vocab_size, m.model.num_query_groups) == (128256, 8)
    assert m.step_time_s == pytest.approx(11.48455)


def test_moe_dispatcher_and_a2a_overlap_reach_the_optional_columns() -> None:
    row = parse_megatron_log(MOE).to_measurement_rows()[0]
    assert row["moe_dispatcher"] == "alltoall"
    assert "moe_a2a_overlap" not in row  # Megatron-Core 0.6 has no such argument: the default
    flagged = MOE.replace(
        "  moe_token_dispatcher_type ....................... alltoall",
        "  moe_token_dispatcher_type ....................... flex\n"
        "[default0]:  overlap_moe_expert_parallel_comm ................ True",
    )
    row = parse_megatron_log(flagged).to_measurement_rows()[0]
    assert (row["moe_dispatcher"], row["moe_a2a_overlap"]) == ("flex", "yes")


def test_row_records_the_software_stack_from_the_arguments() -> None:
    from planner.megatron.log_stack import stack_columns

    derived: list[str] = []
    new = stack_columns(
        {"tp_comm_overlap": "True", "attention_backend": "AttnBackend.flash",
         "cross_entropy_loss_fusion": "True", "cross_entropy_fusion_impl": "te",
         "moe_router_force_load_balancing": "True", "cuda_graph_scope": "full_iteration",
         "grad_reduce_in_bf16": "False"},
        derived,
    )  # fmt: skip
    assert new == {"tp_comm_overlap": "yes", "attention_backend": "flash",
                   "cross_entropy_fusion": "te", "moe_imbalance": "1.0",
                   "cuda_graphs": "full_iteration", "grad_reduce_dtype": "fp32",
                   "megatron_core_version": "0.12"}  # fusion impl te: 0.12-0.18  # fmt: skip
    old = stack_columns({"tensor_model_parallel_size": "8"}, derived)  # a 2021 log
    assert old["tp_comm_overlap"] == "no" and old["cross_entropy_fusion"] == "unfused"
    assert any("predates" in d for d in derived)
