"""Memory settings (issue 13): each field moves the terms it should, by the sourced amount."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planner.layouts import LayoutBatch
from planner.memory.activations import ActivationShape, layer_activations
from planner.memory.estimate import MemoryEstimate, estimate_memory
from planner.memory.recompute import fp8_saving
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import LLAMA_8B as LLAMA8B
from tests.planner.fixtures import MIXTRAL_8X7B as MIXTRAL
from tests.planner.memory.test_estimate import CLUSTER, GPU

JOB = TrainingJob(seq_length=4096, global_batch_size=64)
FP8 = TrainingJob(seq_length=4096, global_batch_size=64, precision="fp8")
HOSTED = ClusterSpec(
    name="hosted",
    gpu=replace(GPU, host_link_bandwidth_bytes_per_s=64e9),
    num_gpus=8,
    host_memory_bytes_per_gpu=256e9,
)


def estimate(layouts: list[Layout], job: TrainingJob = JOB, **kw: Any) -> MemoryEstimate:
    model = kw.pop("model", LLAMA8B)
    cluster = kw.pop("cluster", HOSTED)
    return estimate_memory(model, cluster, job, LayoutBatch.from_layouts(layouts), **kw)


def test_dense_layer_keeps_13h_plus_6f_per_token_in_bf16_and_12h_plus_5f_in_fp8() -> None:
    # mechanisms-facts §6.2 worked example, Llama-3-8B (h 4096, F 14336, g/a 1/4), per t
    batch = LayoutBatch.from_layouts([Layout(recompute="selective")])
    shape = ActivationShape.of(4096, batch)
    acts = layer_activations(
        LLAMA8B, shape, moe=False, swiglu_fused=True, flash_attention=True, moe_imbalance=1.0
    )
    h, f = 4096, 14336
    per_token = float((acts.full - acts.core_attention)[0]) / 4096
    assert per_token == 13 * h + 6 * f  # 139 KB
    saving = float(fp8_saving(LLAMA8B, shape, batch, moe=False, imbalance=1.0)[0]) / 4096
    assert per_token - saving == 12 * h + 5 * f  # 121 KB, -13 %


def test_bf16_gradients_and_moments_halve_their_terms() -> None:
    base = Layout(dp=8)
    est = estimate([base, replace(base, grad_reduce_dtype="bf16"),
                    replace(base, optimizer_state_dtype="bf16")])  # fmt: skip
    grads, opt = est.terms["gradients_bytes"], est.terms["optimizer_bytes"]
    assert grads[1] == pytest.approx(grads[0] / 2)
    assert opt[2] == pytest.approx(opt[0] / 2)  # 12 -> 6 bytes per parameter (§6.6)
    assert grads[2] == grads[0] and opt[1] == opt[0]


def test_fp16_training_keeps_fp16_gradients_and_an_fp32_copy_in_the_optimizer() -> None:
    fp16 = TrainingJob(seq_length=4096, global_batch_size=64, precision="fp16")
    bf16, half = estimate([Layout(dp=8)]), estimate([Layout(dp=8)], fp16)
    assert half.terms["gradients_bytes"][0] == pytest.approx(bf16.terms["gradients_bytes"][0] / 2)
    assert half.terms["optimizer_bytes"][0] == pytest.approx(
        bf16.terms["optimizer_bytes"][0] * 16 / 12  # megatron-facts §4.3: 4 + 16/d
    )


def test_optimizer_offload_moves_the_moments_to_the_host() -> None:
    lays = [Layout(dp=8, optimizer_offload_fraction=f) for f in (0.0, 0.25, 1.0)]
    est = estimate(lays)
    opt = est.terms["optimizer_bytes"]
    assert est.host_bytes is not None and est.host_fits is not None
    # fp32 moments are 8 of the 12 optimizer bytes: f = 1 leaves the master weights (4)
    assert opt[2] == pytest.approx(opt[0] / 3)
    assert opt[0] - opt[1] == pytest.approx((opt[0] - opt[2]) / 4)
    assert est.host_bytes[0] == 0 and est.host_bytes[2] == pytest.approx(2 * (opt[0] - opt[2]))
    small = replace(HOSTED, host_memory_bytes_per_gpu=1e9)
    tight = estimate(lays, cluster=small)
    assert tight.host_fits is not None
    assert list(tight.host_fits) == [True, False, False]
    assert not tight.fits[2]


def test_each_recompute_module_frees_memory_where_it_applies() -> None:
    def act(model: Any, modules: tuple[str, ...] | None, **kw: Any) -> float:
        lay = Layout(dp=8, recompute="selective", recompute_modules=modules, **kw)
        return float(estimate([lay], model=model).terms["activations_bytes"][0])

    default = act(LLAMA8B, None)
    assert act(LLAMA8B, ("core_attn", "mlp")) < default
    assert act(LLAMA8B, ("mlp",)) > act(LLAMA8B, ("core_attn", "mlp"))
    assert act(LLAMA8B, ("core_attn", "layernorm")) == default  # norms fused into TE linears
    moe_default = act(MIXTRAL, None, ep=8)
    assert act(MIXTRAL, ("core_attn", "moe_act"), ep=8) < moe_default
    assert act(MIXTRAL, ("core_attn", "layernorm"), ep=8) < moe_default  # separate MoE norm
    assert act(MIXTRAL, ("core_attn", "moe"), ep=8) < act(MIXTRAL, ("core_attn", "moe_act"), ep=8)


def test_block_recompute_keeps_the_layers_it_does_not_recompute() -> None:
    full = [Layout(dp=8, recompute="full", recompute_num_layers=n) for n in (None, 8, 32)]
    act = estimate(full).terms["activations_bytes"]
    none = estimate([Layout(dp=8)]).terms["activations_bytes"][0]
    assert act[0] < act[1] < none  # 8 of 32 layers recomputed: between full and none
    assert act[2] == act[0]  # N >= the chunk's layers: every layer


def test_cuda_graph_buffers() -> None:
    est = estimate([Layout(dp=8, cuda_graphs=g) for g in ("none", "partial", "full_iteration")])
    graphs = est.terms["cuda_graphs_bytes"]
    assert graphs[0] == 0 < graphs[2] < graphs[1]


def test_activation_offload_moves_activations_to_the_host() -> None:
    est = estimate([Layout(dp=8), Layout(dp=8, activation_offload_layers=16)])
    act = est.terms["activations_bytes"]
    assert est.host_bytes is not None
    assert act[1] < act[0]
    assert est.host_bytes[1] == pytest.approx(act[0] - act[1])
    # 16 of 32 identical layers: half of the per-layer activations (one micro-batch, pp = 1)
    assert (act[0] - act[1]) / act[0] == pytest.approx(0.5)


def test_an_even_pipeline_layout_matches_the_planner_split() -> None:
    lay = Layout(pp=4, vpp=2, dp=2, recompute="selective")
    with_layout = replace(lay, pipeline_layout="Etttt|(tttt|)*6ttttL")
    est = estimate([lay, with_layout], cluster=CLUSTER)
    # equal but for the token ids: the layout counts chunk 0's 2p-1 micro-batches, not p+(p-1)/v
    assert est.total_bytes[1] == pytest.approx(est.total_bytes[0], rel=1e-5)
    assert est.worst_rank is not None and est.worst_rank[1] in (0, 3)


def test_every_rank_of_a_layout_is_charged() -> None:
    # a heavy middle rank: 2 layers on ranks 0 and 3, 14 on ranks 1 and 2 (pp = 4, no vpp)
    lay = Layout(pp=4, dp=2, pipeline_layout="Ett|t*14|t*14|ttL")
    est = estimate([lay, replace(lay, pipeline_layout="Et*8|t*8|t*8|t*8L")], cluster=CLUSTER)
    assert est.worst_rank is not None
    assert est.worst_rank[0] in (1, 2)
    assert est.total_bytes[0] > est.total_bytes[1]
    assert est.first_stage_bytes[0] < est.total_bytes[0]


def test_deepseek_v3_memory_settings_bring_the_h100_recipe_down() -> None:
    from models_db.catalog import cluster_spec, load_model

    model = load_model("deepseek-v3")
    job = TrainingJob(seq_length=4096, global_batch_size=8192, precision="fp8")
    base = Layout(tp=2, pp=8, vpp=4, ep=64, etp=1, dp=64, recompute="selective",
                  pipeline_layout="Et|(tt|)*30mL")  # fmt: skip
    tuned = replace(base, recompute_modules=("mla_up_proj", "mlp", "moe_act", "layernorm"),
                    grad_reduce_dtype="bf16", optimizer_state_dtype="bf16")  # fmt: skip
    est = estimate_memory(
        model, cluster_spec("dgx-h100", 1024), job, LayoutBatch.from_layouts([base, tuned])
    )
    saved = est.total_bytes[0] - est.total_bytes[1]
    assert saved > 30 * 2**30  # MLA up-proj alone: 30.4 GB/GPU in NVIDIA's paper (§6.4)
    assert np.all(est.worst_rank is not None)


def test_expandable_segments_shrink_the_fragmentation_term() -> None:
    from planner.memory.estimate import MemoryOptions

    lay = [Layout(dp=8)]
    cached = estimate(lay).terms["fragmentation_bytes"][0]
    expandable = estimate(lay, options=MemoryOptions(expandable_segments=True))
    assert 0 < expandable.terms["fragmentation_bytes"][0] < cached / 4


def test_the_deepep_dispatcher_holds_its_buffers() -> None:
    lays = [Layout(ep=8, dp=8, moe_dispatcher=d) for d in ("alltoall", "flex")]
    comm = estimate(lays, model=MIXTRAL).terms["comm_buffers_bytes"]
    # + 2 GiB of registered buffers, - permute 1's explicit top-k copy that flex fuses away
    # (mechanisms-facts §4.4): 4096 tokens x K 2 x imbalance 1.2 x h 4096 x 2 bytes
    assert comm[1] - comm[0] == pytest.approx(2 * 2**30 - 4096 * 2 * 1.2 * 4096 * 2)


def test_volta_has_no_flash_attention() -> None:
    v100 = replace(HOSTED, gpu=replace(GPU, architecture="volta", bf16_supported=False))
    fp16 = TrainingJob(seq_length=4096, global_batch_size=64, precision="fp16")
    flash = estimate([Layout(dp=8)], fp16).terms["activations_bytes"][0]
    scores = estimate([Layout(dp=8)], fp16, cluster=v100).terms["activations_bytes"][0]
    assert scores > 2 * flash  # the s^2 softmax output per head is kept (Korthikanti §4.1)
