"""parse_megatron_args refuses a malformed or out-of-range flag value with the flag named: no
silent default, no usage dump and exit, no '1_0' read as 10 (planner/megatron/flag_values.py)."""

from __future__ import annotations

import pytest

from planner.megatron.args import _parser, parse_megatron_args
from planner.megatron.flag_values import DECIMAL_RANGE, WHOLE_LOW
from planner.specs import SpecError

BASE = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
        "--ffn-hidden-size", "1024", "--vocab-size", "1000", "--seq-length", "128",
        "--max-position-embeddings", "128", "--micro-batch-size", "1",
        "--global-batch-size", "8"]  # fmt: skip
MOE = ["--num-experts", "4"]


def refused(*extra: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_megatron_args([*BASE, *extra])
    return caught.value


@pytest.mark.parametrize(
    ("extra", "field", "said"),
    [
        (["--hidden-dropout", "abc"], "hidden_dropout", "--hidden-dropout 'abc' is not a number"),
        (["--hidden-dropout", "1.5"], "hidden_dropout", "--hidden-dropout 1.5 must be in [0, 1]"),
        (["--attention-dropout", "nan"], "attention_dropout", "'nan' is not a number"),
        (["--attention-dropout", "-0.1"], "attention_dropout", "must be in [0, 1]"),
        (["--hidden-dropout", "1_0"], "hidden_dropout", "'1_0' is not a number"),
        (["--num-layers", "٤"], "num_layers", "'٤' is not a whole number"),
        (["--tensor-model-parallel-size", "x"], "tensor_model_parallel_size", "'x' is not a whole"),
        (["--tensor-model-parallel-size", "0"], "tensor_model_parallel_size", "0 must be >= 1"),
        (["--seq-length", "1_28"], "seq_length", "'1_28' is not a whole number"),
        (["--rotary-percent", "2"], "rotary_percent", "2 must be in (0, 1]"),
        (["--rotary-base", "inf"], "rotary_base", "'inf' is not a number"),
        (["--hidden-dropout"], "hidden_dropout", "expected one argument"),
        (["--cpu-offloading-num-layers", "-1"], "cpu_offloading_num_layers", "-1 must be >= 0"),
        (["--optimizer-cpu-offload", "--optimizer-offload-fraction", "2"],
         "optimizer_offload_fraction", "2 must be in [0, 1]"),
        (["--cuda-graph-impl", "te"], "cuda_graph_impl", "invalid choice: 'te'"),
        ([*MOE, "--moe-token-dispatcher-type", "alltoal"], "moe_token_dispatcher_type",
         "invalid choice: 'alltoal'"),
        ([*MOE, "--moe-layer-freq", "abc"], "moe_layer_freq", "'abc' is not a layer frequency"),
        ([*MOE, "--moe-layer-freq", "0"], "moe_layer_freq", "0 must be >= 1"),
        ([*MOE, "--moe-layer-freq", "[0,1,2,1]"], "moe_layer_freq", "not a layer frequency"),
        (["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "3"],
         "num_layers_per_virtual_pipeline_stage", "3 must divide the 2 layers of each"),
        (["--recompute-granularity", "selective", "--recompute-modules", "mlp", "bogus"],
         "recompute_modules", "'bogus' not supported"),
    ],
)  # fmt: skip
def test_a_bad_value_is_refused_naming_the_flag(extra: list[str], field: str, said: str) -> None:
    error = refused(*extra)
    assert error.field == field
    assert said in error.message


def test_a_bad_value_never_exits_or_prints(capsys: pytest.CaptureFixture[str]) -> None:
    refused("--tensor-model-parallel-size", "two")  # argparse would print usage and exit 2
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        (["--hidden-dropout", "0"], "hidden_dropout", 0.0),
        (["--hidden-dropout", "1.0"], "hidden_dropout", 1.0),  # torch takes it; ModelSpec says
        (["--attention-dropout", "5e-2"], "attention_dropout", 0.05),
        (["--mtp-num-layers", "0"], "mtp_num_layers", 0),
        ([*MOE, "--moe-layer-freq", "[0,1,1,1]"], "moe_layer_freq", 1),
        ([*MOE, "--moe-layer-freq", "([0]*1+[1]*3)"], "moe_first_dense_layers", 1),
    ],
)
def test_what_megatron_accepts_is_kept_as_given(extra: list[str], field: str, value: float) -> None:
    assert parse_megatron_args([*BASE, *extra]).model_fields[field] == value


def test_vpp_by_layers_per_stage_reads_when_it_divides() -> None:
    flags = [*BASE, "--pipeline-model-parallel-size", "2",
             "--num-layers-per-virtual-pipeline-stage", "1"]  # fmt: skip
    assert parse_megatron_args(flags, world_size=2).layout.vpp == 2


def test_every_number_flag_is_read_strictly() -> None:
    flags = {a.option_strings[0]: a for a in _parser()._actions if a.option_strings}
    assert not [f for f, a in flags.items() if a.type in (int, float)]  # none left to argparse
    assert set(WHOLE_LOW) | set(DECIMAL_RANGE) <= set(flags)  # no stale name in the tables
