"""Sliding-window, attention-sink and activation flags: emitted from the ModelSpec and parsed
back (catalog-facts §1.3, §1.6)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models_db.catalog import list_models, load_model
from planner.megatron.args import parse_megatron_args
from planner.megatron.flags import megatron_args
from planner.specs import ClusterSpec, Layout, ModelSpec, SpecError, TrainingJob
from tests.planner.fixtures import H100

JOB = TrainingJob(seq_length=4096, global_batch_size=64)
CLUSTER = ClusterSpec(name="c8", gpu=H100, num_gpus=8)


def args_of(model: ModelSpec, layout: Layout | None = None) -> list[str]:
    return megatron_args(model, CLUSTER, JOB, layout or Layout(dp=8))


def after(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, flag
    return args[args.index(flag) + 1]


def test_gpt_oss_flags_train_its_window_sinks_and_activation() -> None:
    args = args_of(load_model("gpt-oss-120b"), Layout(ep=8, dp=8))
    assert after(args, "--window-size") == "127,0"  # not NeMo's 128,0 (pitfall 11)
    assert after(args, "--window-attn-skip-freq") == "2"
    assert after(args, "--softmax-type") == "learnable"
    assert "--quick-geglu" in args and "--swiglu" not in args
    assert after(args, "--glu-linear-offset") == "1"
    assert after(args, "--activation-func-clamp-value") == "7"


def test_defaults_emit_no_variant_flags() -> None:
    args = args_of(load_model("llama3.1-8b"))
    absent = ("--window-size", "--window-attn-skip-freq", "--softmax-type", "--quick-geglu",
              "--squared-relu", "--glu-linear-offset", "--activation-func-clamp-value")  # fmt: skip
    assert not set(absent) & set(args)
    assert "--swiglu" in args


@pytest.mark.parametrize("slug", list_models())
def test_every_catalog_model_parses_back_with_its_variants(slug: str) -> None:
    model = load_model(slug)
    layout = Layout(ep=8, dp=8) if model.is_moe and (model.num_experts or 0) % 8 == 0 else None
    fields = parse_megatron_args(args_of(model, layout), world_size=8).model_fields
    rebuilt = ModelSpec(name=model.name, **fields)
    for name in ("swiglu", "quick_geglu", "squared_relu", "glu_linear_offset",
                 "activation_func_clamp_value", "window_size", "window_attn_skip_freq",
                 "softmax_type"):  # fmt: skip
        assert getattr(rebuilt, name) == getattr(model, name), name


def test_squared_relu_and_every_layer_windowed_round_trip() -> None:
    model = replace(
        load_model("llama3.1-8b"),
        swiglu=False,
        squared_relu=True,
        window_size=(4095, 0),
        softmax_type="off-by-one",
    )
    args = args_of(model)
    assert "--squared-relu" in args and "--window-attn-skip-freq" not in args
    fields = parse_megatron_args(args, world_size=8).model_fields
    assert (fields["squared_relu"], fields["window_size"], fields["softmax_type"]) == (
        True,
        (4095, 0),
        "off-by-one",
    )
    assert fields["window_attn_skip_freq"] is None


def test_skip_freq_without_window_is_refused_when_parsing() -> None:
    args = [*args_of(load_model("llama3.1-8b")), "--window-attn-skip-freq", "2"]
    with pytest.raises(SpecError, match="--window-attn-skip-freq is set without --window-size"):
        parse_megatron_args(args, world_size=8)
