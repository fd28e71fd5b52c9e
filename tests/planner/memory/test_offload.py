"""Fine-grained activation offload (``--offload-modules``): field, memory, time, flags, search."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models_db.catalog import cluster_spec, load_model
from planner import default_profile, estimate_performance, launch_spec, parse_megatron_args
from planner.layouts import LayoutBatch
from planner.memory.estimate import estimate_memory
from planner.offload_bytes import MIN_OFFLOADED_ELEMENTS, offload_transfer_seconds
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.memory_axes import MemoryChoices
from planner.specs import Layout, SpecError, TrainingJob
from tests.planner.fixtures import LLAMA_8B as LLAMA8B
from tests.planner.fixtures import MIXTRAL_8X7B as MIXTRAL
from tests.planner.memory.test_settings import HOSTED, JOB, estimate

ALL_DENSE = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")


def test_layout_orders_the_modules_and_names_the_field_on_bad_input() -> None:
    lay = Layout(activation_offload_modules=("mlp_norm", "attn_norm"))
    assert lay.activation_offload_modules == ("attn_norm", "mlp_norm")
    with pytest.raises(SpecError, match="'attn_proj' needs 'core_attn'") as err:
        Layout(activation_offload_modules=("attn_proj",))
    assert err.value.field == "activation_offload_modules"
    with pytest.raises(SpecError, match="'fc9' not supported; use attn_norm"):
        Layout(activation_offload_modules=("fc9",))  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="offloads nothing"):
        Layout(activation_offload_modules=())


def test_offloaded_inputs_leave_the_gpu_and_land_on_the_host() -> None:
    base = Layout(dp=8)
    est = estimate([base, replace(base, activation_offload_modules=("attn_norm", "mlp_norm"))])
    acts = est.terms["activations_bytes"]
    # two 2sbh norm inputs per layer (mechanisms-facts §6.5), 32 layers less the last one kept
    per_layer = 2 * 2.0 * 4096 * LLAMA8B.hidden_size
    assert acts[0] - acts[1] == pytest.approx(31 * per_layer)
    assert est.host_bytes is not None
    assert est.host_bytes[1] - est.host_bytes[0] == pytest.approx(31 * per_layer)


def test_tensors_under_a_million_elements_stay() -> None:
    # tp=8 with SP: a norm input is 4096/8 tokens x 4096 = 2 M elements; at s=512, 0.26 M
    short = TrainingJob(seq_length=512, global_batch_size=64)
    lays = [Layout(tp=8), Layout(tp=8, activation_offload_modules=("attn_norm",))]
    est = estimate(lays, short)
    assert MIN_OFFLOADED_ELEMENTS > 512 / 8 * 4096
    assert est.terms["activations_bytes"][0] == est.terms["activations_bytes"][1]


def test_expert_inputs_are_offloaded_per_routed_copy() -> None:
    base = Layout(ep=8, dp=8, moe_a2a_overlap=False)  # one micro-batch in flight
    est = estimate([base, replace(base, activation_offload_modules=("expert_fc1",))], model=MIXTRAL)
    saved = est.terms["activations_bytes"][0] - est.terms["activations_bytes"][1]
    # each token's permuted hidden (2h) K=2 times, x 1.2 imbalance, per MoE layer but the last
    per_layer = 2.0 * 4096 * MIXTRAL.hidden_size * 2 * 1.2
    assert saved == pytest.approx(31 * per_layer)


def test_full_recompute_leaves_nothing_to_offload() -> None:
    lays = [Layout(dp=8, recompute="full"),
            Layout(dp=8, recompute="full", activation_offload_modules=ALL_DENSE)]  # fmt: skip
    acts = estimate(lays).terms["activations_bytes"]
    assert acts[0] == acts[1]


def test_transfer_is_exposed_only_beyond_the_blocks_compute() -> None:
    one = np.array([1.0])
    # 64 GB of attention inputs on a 64 GB/s link: 1 s each way; attention is half of a 3 s layer
    exposed = offload_transfer_seconds(64e9 * one, 0 * one, 0.5 * one, 3.0 * one, 64e9)
    assert exposed[0] == pytest.approx((1 - 0.5) + (1 - 1.0))  # forward 0.5 s, backward 1 s
    hidden = offload_transfer_seconds(1e9 * one, 1e9 * one, 0.5 * one, 3.0 * one, 64e9)
    assert hidden[0] == 0.0


def _dsv3(sets: list[tuple[str, ...] | None]) -> tuple[np.ndarray, np.ndarray]:
    model = load_model("deepseek-v3")
    cluster = cluster_spec("dgx-h100", 1024)
    job = TrainingJob(seq_length=4096, global_batch_size=8192, precision="fp8")
    base = Layout(tp=2, pp=8, vpp=4, ep=64, etp=1, dp=64, pipeline_layout="Et|(tt|)*30mL",
                  recompute="selective", grad_reduce_dtype="bf16", optimizer_state_dtype="bf16",
                  recompute_modules=("mla_up_proj", "mlp", "moe_act", "layernorm"))  # fmt: skip
    batch = LayoutBatch.from_layouts(
        [replace(base, activation_offload_modules=s) for s in sets]  # type: ignore[arg-type]
    )
    mem = estimate_memory(model, cluster, job, batch)
    perf = estimate_performance(model, cluster, job, batch, default_profile(cluster.gpu))
    return mem.total_bytes, perf.step_time_s


def test_deepseek_v3_offload_against_the_published_cost() -> None:
    # published (mechanisms-facts §6.5, MoE paper via the MB card): 1.6-2 % of throughput for
    # 10-18 % of memory. The model hides the expert inputs' transfer behind the MoE compute
    # entirely (it charges no stream syncs), so it must save about as much and cost no more
    total, step = _dsv3([None, ("expert_fc1",), ("attn_norm", "mlp_norm", "expert_fc1")])
    saving = 1 - total[1:] / total[0]
    slowdown = step[1:] / step[0] - 1
    assert 0.10 <= saving[0] <= 0.20 and 0.0 <= slowdown[0] <= 0.02
    assert saving[1] > saving[0] and 0.0 <= slowdown[1] <= 0.02
    # offloading everything outruns a PCIe Gen5 link: the transfer shows in the step
    total_all, step_all = _dsv3([None, (*ALL_DENSE, "expert_fc1", "moe_act")])
    assert step_all[1] > 1.1 * step_all[0] and total_all[1] < 0.5 * total_all[0]


def test_flags_env_and_parser_round_trip() -> None:
    job = TrainingJob(seq_length=4096, global_batch_size=128)
    lay = Layout(ep=8, dp=8, activation_offload_modules=("moe_act", "core_attn", "attn_proj"))
    spec = launch_spec(MIXTRAL, HOSTED, job, lay)
    i = spec.args.index("--offload-modules")
    assert spec.args[i - 1] == "--fine-grained-activation-offloading"
    assert spec.args[i + 1 : i + 4] == ["core_attn", "attn_proj", "moe_act"]
    assert spec.env["NVTE_CPU_OFFLOAD_V1"] == "1"
    assert "NVTE_CPU_OFFLOAD_V1=1" in spec.command
    parsed = parse_megatron_args(spec.args).layout
    assert parsed.activation_offload_modules == ("core_attn", "attn_proj", "moe_act")
    plain = launch_spec(MIXTRAL, HOSTED, job, Layout(ep=8, dp=8))
    assert "NVTE_CPU_OFFLOAD_V1" not in plain.env
    assert "--offload-modules" not in plain.args


def test_offload_is_a_search_axis_only_when_allowed() -> None:
    model, cluster = load_model("llama3.1-8b"), cluster_spec("dgx-h100", 8)

    def sets(**kw: object) -> set[tuple[str, ...] | None]:
        constraints = SearchConstraints(memory=MemoryChoices(**kw))  # type: ignore[arg-type]
        batch = enumerate_layouts(model, cluster, JOB, constraints)
        return {x.activation_offload_modules for x in batch.layouts()}

    assert sets() == {None}
    assert sets(activation_offload_modules=("mlp_norm",)) == {("mlp_norm",)}
    assert sets(search_activation_offload=True) == {None, ALL_DENSE}
    assert sets(activation_offload_modules=("mlp_norm",), search_activation_offload=True) == {
        None,
        ("mlp_norm",),
    }
    with pytest.raises(SpecError, match="needs 'core_attn'"):
        MemoryChoices(activation_offload_modules=("attn_proj",))  # type: ignore[arg-type]
