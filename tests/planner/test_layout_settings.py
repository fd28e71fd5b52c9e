"""The memory-setting fields of a Layout: validation, normalisation and batch round trips."""

from __future__ import annotations

from typing import Any

import pytest

from planner.layouts import LayoutBatch
from planner.specs import GPUSpec, Layout, SpecError, TrainingJob


@pytest.mark.parametrize(
    ("kwargs", "field", "text"),
    [
        ({"grad_reduce_dtype": "fp16"}, "grad_reduce_dtype", "fp32, bf16"),
        ({"optimizer_state_dtype": "fp8"}, "optimizer_state_dtype", "fp32, bf16"),
        ({"cuda_graphs": "all"}, "cuda_graphs", "none, partial, full_iteration"),
        ({"fp8_param_gather": "yes"}, "fp8_param_gather", "true, false or null"),
        ({"recompute_modules": ["mlp"]}, "recompute_modules", "recompute='selective'"),
        (
            {"recompute": "selective", "recompute_modules": ["attn"]},
            "recompute_modules",
            "core_attn, mlp",
        ),
        ({"recompute": "selective", "recompute_modules": []}, "recompute_modules", "'none'"),
        ({"recompute": "selective", "recompute_modules": "mlp"}, "recompute_modules", "a list"),
        ({"recompute_num_layers": 2}, "recompute_num_layers", "recompute='full'"),
        ({"recompute": "full", "recompute_num_layers": 0}, "recompute_num_layers", "positive"),
        ({"activation_offload_layers": -1}, "activation_offload_layers", ">= 0"),
        ({"optimizer_offload_fraction": 1.5}, "optimizer_offload_fraction", "[0, 1]"),
        ({"optimizer_offload_fraction": True}, "optimizer_offload_fraction", "a number"),
        ({"pipeline_layout": " "}, "pipeline_layout", "non-empty string"),
        ({"pipeline_layout": 3}, "pipeline_layout", "non-empty string"),
    ],
)
def test_bad_values_name_the_field_and_the_fix(
    kwargs: dict[str, Any], field: str, text: str
) -> None:
    with pytest.raises(SpecError) as info:
        Layout(**kwargs)
    assert info.value.field == field
    assert text in info.value.message


def test_module_sets_have_one_spelling() -> None:
    a = Layout(recompute="selective", recompute_modules=["mlp", "core_attn"])
    b = Layout(recompute="selective", recompute_modules=("core_attn", "mlp"))
    assert a == b and a.recompute_modules == ("core_attn", "mlp")
    default = Layout(recompute="selective", recompute_modules=["core_attn"])
    assert default == Layout(recompute="selective")


def test_layouts_survive_the_batch_round_trip() -> None:
    layouts = [
        Layout(),
        Layout(tp=2, dp=4, grad_reduce_dtype="bf16", optimizer_state_dtype="bf16",
               fp8_param_gather=False, recompute="selective",
               recompute_modules=("moe_act", "layernorm"), cuda_graphs="partial",
               optimizer_offload_fraction=0.25),
        Layout(pp=8, vpp=4, recompute="full", recompute_num_layers=2,
               pipeline_layout="Et|(tt|)*30mL", activation_offload_layers=3),
    ]  # fmt: skip
    batch = LayoutBatch.from_layouts(layouts)
    assert batch.layouts() == [lay.normalized() for lay in layouts]
    assert LayoutBatch.concat([batch, batch.take([2])]).layout(3) == layouts[2].normalized()
    assert Layout.from_dict(layouts[1].to_dict()) == layouts[1].normalized()


def test_fp16_is_a_precision_and_gpus_say_whether_they_have_bf16() -> None:
    assert TrainingJob(seq_length=2048, global_batch_size=8, precision="fp16").precision == "fp16"
    with pytest.raises(SpecError, match="fp16"):
        TrainingJob(seq_length=2048, global_batch_size=8, precision="fp64")  # type: ignore[arg-type]
    with pytest.raises(SpecError) as info:
        GPUSpec(name="x", hbm_bytes=1, hbm_bandwidth_bytes_per_s=1.0, peak_bf16_flop_per_s=1.0,
                peak_fp8_flop_per_s=None, intra_node_bandwidth_bytes_per_s=1.0,
                host_link_bandwidth_bytes_per_s=0.0)  # fmt: skip
    assert info.value.field == "host_link_bandwidth_bytes_per_s"
