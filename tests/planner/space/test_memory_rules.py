"""Rules of the memory settings: each fires on a layout that breaks it, not on a fixed one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planner.space.rules import violations
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.space.test_rules import H100, JOB, cluster, dense, fired, moe

V100 = replace(H100, name="v100", bf16_supported=False, peak_fp8_flop_per_s=None,
               architecture="volta")  # fmt: skip
HOSTED = replace(H100, host_link_bandwidth_bytes_per_s=64e9)
FP8 = TrainingJob(seq_length=4096, global_batch_size=128, precision="fp8")
FP16 = TrainingJob(seq_length=4096, global_batch_size=128, precision="fp16")


def hosted(n: int) -> ClusterSpec:
    return ClusterSpec(name="h", gpu=HOSTED, num_gpus=n, host_memory_bytes_per_gpu=256e9)


MLA = dict(
    multi_latent_attention=True, num_query_groups=None, kv_lora_rank=512, qk_head_dim=128,
    qk_pos_emb_head_dim=64, v_head_dim=128,
)  # fmt: skip

# (rule id, model, cluster, job, breaking layout, (model, cluster, job, fixed layout))
MEMORY_CASES: list[tuple[Any, ...]] = [
    ("bf16_needs_gpu_support", dense(), cluster(8, V100), JOB, Layout(dp=8),
     (dense(), cluster(8, V100), FP16, Layout(dp=8))),
    ("pipeline_layout_valid", dense(), cluster(8), JOB,
     Layout(pp=4, vpp=2, dp=2, pipeline_layout="Et|(tttt|)*6ttL"),
     (dense(), cluster(8), JOB, Layout(pp=4, vpp=2, dp=2, pipeline_layout="Etttt|(tttt|)*6ttttL"))),
    ("recompute_modules_apply", dense(), cluster(8), JOB,
     Layout(dp=8, recompute="selective", recompute_modules=("moe_act",)),
     (dense(), cluster(8), JOB, Layout(dp=8, recompute="selective", recompute_modules=("mlp",)))),
    ("recompute_modules_apply", dense(), cluster(8), JOB,
     Layout(dp=8, recompute="selective", recompute_modules=("mla_up_proj",)),
     (dense(**MLA), cluster(8), JOB,
      Layout(dp=8, recompute="selective", recompute_modules=("mla_up_proj",)))),
    ("moe_a2a_overlap_allowed", moe(), cluster(8), JOB,  # rule 40: 'moe' replays the A2A
     Layout(dp=8, ep=8, recompute="selective", recompute_modules=("moe",), moe_a2a_overlap=True),
     (moe(), cluster(8), JOB,
      Layout(dp=8, ep=8, recompute="selective", recompute_modules=("moe",),
             moe_a2a_overlap=False))),
    ("fp8_param_gather_needs_sharding", dense(), cluster(8), JOB,
     Layout(dp=8, fp8_param_gather=True), (dense(), cluster(8), FP8,
                                            Layout(dp=8, fp8_param_gather=True))),
    ("activation_offload_allowed", dense(), hosted(8), JOB,
     Layout(pp=2, dp=4, activation_offload_layers=4),
     (dense(), hosted(8), JOB, Layout(dp=8, activation_offload_layers=4))),
    ("offload_needs_host_spec", dense(), cluster(8), JOB,
     Layout(dp=8, optimizer_offload_fraction=0.5),
     (dense(), hosted(8), JOB, Layout(dp=8, optimizer_offload_fraction=0.5))),
    ("optimizer_offload_needs_sharding", dense(), hosted(8), JOB,
     Layout(dp=8, optimizer_sharding="none", optimizer_offload_fraction=0.5),
     (dense(), hosted(8), JOB, Layout(dp=8, optimizer_offload_fraction=0.5))),
    ("cuda_graphs_compatible", dense(), cluster(8), JOB,
     Layout(dp=8, recompute="full", cuda_graphs="partial"),
     (dense(), cluster(8), JOB, Layout(dp=8, recompute="full", cuda_graphs="full_iteration"))),
    ("fine_offload_not_with_legacy", dense(), hosted(8), JOB,
     Layout(dp=8, activation_offload_layers=2, activation_offload_modules=("attn_norm",)),
     (dense(), hosted(8), JOB, Layout(dp=8, activation_offload_modules=("attn_norm",)))),
    ("fine_offload_moe_modules", dense(), hosted(8), JOB,
     Layout(dp=8, activation_offload_modules=("expert_fc1",)),
     (moe(), hosted(8), JOB, Layout(dp=8, ep=8, activation_offload_modules=("expert_fc1",)))),
    ("fine_offload_moe_modules", moe(), hosted(8), JOB,
     Layout(dp=8, ep=8, recompute="selective", recompute_modules=("moe",), moe_a2a_overlap=False,
            activation_offload_modules=("moe_act",)),
     (moe(), hosted(8), JOB, Layout(dp=8, ep=8, recompute="selective",
                                    recompute_modules=("moe_act",),
                                    activation_offload_modules=("moe_act",)))),
    ("offload_needs_host_spec", dense(), cluster(8), JOB,
     Layout(dp=8, activation_offload_modules=("mlp_norm",)),
     (dense(), hosted(8), JOB, Layout(dp=8, activation_offload_modules=("mlp_norm",)))),
]  # fmt: skip
MEMORY_RULE_IDS = {c[0] for c in MEMORY_CASES}


@pytest.mark.parametrize(
    "case", MEMORY_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(MEMORY_CASES)]
)
def test_memory_rule_fires_and_its_fix_passes(case: tuple[Any, ...]) -> None:
    rule_id, model, c, job, bad, (good_model, good_c, good_job, good) = case
    assert rule_id in fired(model, c, job, bad)
    assert fired(good_model, good_c, good_job, good) == set()


def test_messages_name_the_field_and_the_fix() -> None:
    bad = Layout(pp=4, vpp=2, dp=2, pipeline_layout="Et|(tttt|)*6ttL")
    (message,) = violations(dense(), cluster(8), JOB, bad)
    assert "27 decoder layers" in message and "num_layers=32" in message
    act = violations(dense(), hosted(8), JOB, Layout(pp=2, dp=4, activation_offload_layers=4))
    assert any("pp=1 (got 2)" in m for m in act)


def test_deepseek_v3_shipped_layouts_are_valid() -> None:
    from models_db.catalog import cluster_spec, load_model

    model = load_model("deepseek-v3")
    big = cluster_spec("dgx-h100", 1024)
    job = TrainingJob(seq_length=4096, global_batch_size=8192, precision="fp8")
    base: dict[str, Any] = dict(tp=2, pp=8, ep=64, etp=1, dp=64, recompute="selective")
    vpp4 = Layout(**base, vpp=4, pipeline_layout="Et|(tt|)*30mL")
    vpp2 = Layout(**base, vpp=2, pipeline_layout="Et*4|(tttt|)*14tmL")
    assert fired(model, big, job, vpp4) == set()
    assert fired(model, big, job, vpp2) == set()
    # without a layout Megatron cannot split 61 layers over 8 x 4 stages
    assert "layers_split_by_pp_vpp" in fired(model, big, job, replace(vpp4, pipeline_layout=None))
