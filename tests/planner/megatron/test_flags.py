"""Megatron-LM flags: what is emitted, and that it parses back to the same layout and model."""

from __future__ import annotations

import ast
import shlex
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models_db.catalog import list_models, load_model
from planner.megatron.args import parse_megatron_args
from planner.megatron.flags import launch_spec, megatron_args
from planner.space import comm_flags
from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, SpecError, TrainingJob
from tests.planner.fixtures import H100, MIXTRAL_8X7B

B200 = replace(H100, name="b200", architecture="blackwell", peak_fp8_flop_per_s=4.5e15)
LLAMA8B = ModelSpec(
    name="llama3.1-8b", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
    num_attention_heads=32, num_query_groups=8, vocab_size=128256,
    rotary_base=500000, use_rope_scaling=True,
)  # fmt: skip
DEEPSEEK = ModelSpec(
    name="deepseek-v3", num_layers=61, hidden_size=7168, ffn_hidden_size=18432,
    num_attention_heads=128, vocab_size=129280, num_experts=256, moe_router_topk=8,
    moe_ffn_hidden_size=2048, moe_shared_expert_intermediate_size=2048,
    moe_first_dense_layers=3, multi_latent_attention=True, q_lora_rank=1536,
    kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128,
    mtp_num_layers=1, max_position_embeddings=163840,
    rotary_base=10000, rotary_scaling_factor=40, mscale=1.0, mscale_all_dim=1.0,
)  # fmt: skip
JOB = TrainingJob(seq_length=8192, global_batch_size=128)


def cluster(n: int, gpu: GPUSpec = H100) -> ClusterSpec:
    return ClusterSpec(name=f"c{n}", gpu=gpu, num_gpus=n)


def value(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, flag
    return args[args.index(flag) + 1]


# --- round trip (hypothesis) ------------------------------------------------------------------


@st.composite
def rotary_settings(draw: st.DrawFn, kw: dict[str, Any]) -> dict[str, Any]:
    """Rotary fields wherever Megatron reads them (RoPE base, partial rotation, Llama-3, YaRN)."""
    mla = kw.get("multi_latent_attention", False)
    position = kw["position_embedding_type"]
    if not mla and position not in ("rope", "yarn"):
        return {}
    out: dict[str, Any] = {
        "rotary_base": draw(st.sampled_from([None, 10000.0, 150000.0, 500000.0, 1e6, 1234.5])),
        "rotary_percent": draw(st.sampled_from([1.0, 0.5, 0.25])),
    }
    if mla or position == "yarn":
        if draw(st.booleans()):
            out.update(
                rotary_scaling_factor=draw(st.sampled_from([4.0, 32.0, 40.0, 1.5])),
                mscale=draw(st.sampled_from([None, 1.0, 0.707])),
                mscale_all_dim=draw(st.sampled_from([None, 0.0, 1.0, 0.707])),
            )
    elif draw(st.booleans()):
        out.update(use_rope_scaling=True, rope_scaling_factor=draw(st.sampled_from([8.0, 32.0])))
    return out


@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    heads = draw(st.sampled_from([8, 16, 32, 64, 128]))
    head_dim = draw(st.sampled_from([64, 128]))
    layers = draw(st.integers(4, 96))
    kw: dict[str, Any] = dict(
        name="m", num_layers=layers, hidden_size=heads * head_dim,
        ffn_hidden_size=draw(st.integers(1, 400)) * 64, num_attention_heads=heads,
        vocab_size=draw(st.integers(1000, 260_000)),
        kv_channels=draw(st.sampled_from([None, 128, 192])),
        max_position_embeddings=draw(st.sampled_from([None, 2048, 131072])),
        swiglu=draw(st.booleans()),
        normalization=draw(st.sampled_from(["LayerNorm", "RMSNorm"])),
        position_embedding_type=draw(st.sampled_from(["rope", "yarn", "learned_absolute",
                                                      "none"])),
        untie_embeddings_and_output_weights=draw(st.booleans()),
        add_bias_linear=draw(st.booleans()), add_qkv_bias=draw(st.booleans()),
        qk_layernorm=draw(st.booleans()),
        hidden_dropout=draw(st.sampled_from([0.0, 0.1, 0.05])),
        attention_dropout=draw(st.sampled_from([0.0, 0.1])),
    )  # fmt: skip
    if draw(st.booleans()):  # GQA (exclusive with MLA)
        kw["num_query_groups"] = draw(st.sampled_from([g for g in (1, 2, 4, 8) if heads % g == 0]))
    elif draw(st.booleans()):
        kw.update(
            multi_latent_attention=True, kv_channels=None,
            q_lora_rank=draw(st.sampled_from([None, 1536])),
            kv_lora_rank=draw(st.sampled_from([512, 256])),
            qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128,
        )  # fmt: skip
    kw.update(draw(rotary_settings(kw)))
    if draw(st.booleans()):
        experts = draw(st.sampled_from([4, 8, 64, 256]))
        freq = draw(st.integers(1, 3))
        kw.update(
            num_experts=experts,
            moe_router_topk=draw(st.integers(1, 4)),
            moe_ffn_hidden_size=draw(st.sampled_from([None, 768, 2048])),
            moe_shared_expert_intermediate_size=draw(st.sampled_from([None, 2048])),
            moe_layer_freq=freq,
            moe_first_dense_layers=draw(st.integers(0, layers // 2)),
        )
    if kw["position_embedding_type"] != "learned_absolute":
        kw["mtp_num_layers"] = draw(st.integers(0, 2))
    return ModelSpec(**kw)


@st.composite
def layouts(draw: st.DrawFn, model: ModelSpec) -> Layout:
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    experts = model.num_experts or 1
    return Layout(
        tp=tp, pp=pp, vpp=draw(st.sampled_from([1, 2, 3])) if pp > 1 else 1,
        cp=draw(st.sampled_from([1, 2, 4])),
        ep=draw(st.sampled_from([e for e in (1, 2, 4, 8) if experts % e == 0])),
        etp=draw(st.sampled_from([1, tp])) if model.is_moe else None,
        dp=draw(st.integers(1, 16)), micro_batch_size=draw(st.sampled_from([1, 2, 4])),
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
        optimizer_sharding=draw(st.sampled_from(["none", "optimizer", "full"])),
    )  # fmt: skip


@st.composite
def cases(draw: st.DrawFn) -> tuple[ModelSpec, Layout, TrainingJob]:
    model = draw(models())
    job = TrainingJob(
        seq_length=draw(st.sampled_from([2048, 4096, 8192])),
        global_batch_size=draw(st.integers(1, 4096)),
        precision=draw(st.sampled_from(["bf16", "fp8"])),
    )
    return model, draw(layouts(model)), job


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_flags_parse_back_to_the_same_layout_and_job(case: Any) -> None:
    model, layout, job = case
    world = layout.num_gpus
    parsed = parse_megatron_args(megatron_args(model, cluster(8), job, layout), world_size=world)
    expected = comm_flags.resolve(model, cluster(8), layout, tp_overlap_on=job.tp_comm_overlap)
    if expected.cp > 1 and expected.cp_comm_type is None:  # no flag: Megatron's default ring
        expected = replace(expected, cp_comm_type="p2p")
    assert parsed.layout == expected
    assert (parsed.seq_length, parsed.global_batch_size, parsed.precision) == (
        job.seq_length,
        job.global_batch_size,
        job.precision,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_flags_parse_back_to_the_same_model_shape(case: Any) -> None:
    model, layout, job = case
    args = megatron_args(model, cluster(8), job, layout)
    fields = parse_megatron_args(args, world_size=layout.num_gpus).model_fields
    rebuilt = ModelSpec(name=model.name, **fields)
    # max positions are emitted as max(model value, seq); the MoE pattern may be re-expressed
    assert rebuilt.max_position_embeddings == max(
        model.max_position_embeddings or job.seq_length, job.seq_length
    )
    assert rebuilt.moe_layer_pattern() == model.moe_layer_pattern()
    same = {"max_position_embeddings": None, "moe_layer_freq": 1, "moe_first_dense_layers": 0}
    assert replace(rebuilt, **same) == replace(model, **same)


# --- specific flags ---------------------------------------------------------------------------


def test_llama_flags_contain_megatron_facts_case_a() -> None:
    # megatron-facts §8 common flags for A-C plus case A's t=2, p=2, SP, selective, dist-opt
    flags = (
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm "
        "--position-embedding-type rope --untie-embeddings-and-output-weights "
        "--disable-bias-linear --seq-length 8192 --max-position-embeddings 8192 "
        "--micro-batch-size 1 --global-batch-size 128 --bf16 --tensor-model-parallel-size 2 "
        "--pipeline-model-parallel-size 2 --sequence-parallel --recompute-granularity selective "
        "--use-distributed-optimizer"
    )
    expected = shlex.split(flags)
    layout = Layout(tp=2, pp=2, dp=4, recompute="selective")
    args = megatron_args(LLAMA8B, cluster(16), JOB, layout)
    for i, token in enumerate(expected):
        if not token.startswith("--"):
            continue
        nxt = expected[i + 1] if i + 1 < len(expected) else "--"
        if nxt.startswith("--"):
            assert token in args
        else:
            assert value(args, token) == nxt


def test_deepseek_moe_layer_freq_lists_every_layer() -> None:
    args = megatron_args(DEEPSEEK, cluster(64), JOB, Layout(tp=2, ep=8, etp=1, dp=32))
    text = value(args, "--moe-layer-freq")
    assert text == "([0]*3+[1]*58)"
    pattern = eval(text, {"__builtins__": {}})  # the same evaluation Megatron performs
    assert len(pattern) == 61 and pattern[:3] == [0, 0, 0] and sum(pattern) == 58


def test_deepseek_emits_mla_and_mtp_flags() -> None:
    args = megatron_args(DEEPSEEK, cluster(64), JOB, Layout(tp=2, ep=8, etp=1, dp=32))
    assert "--multi-latent-attention" in args and "--group-query-attention" not in args
    assert value(args, "--kv-lora-rank") == "512" and value(args, "--q-lora-rank") == "1536"
    assert value(args, "--normalization") == "RMSNorm"
    assert value(args, "--mtp-num-layers") == "1"
    assert value(args, "--max-position-embeddings") == "163840"


def test_moe_without_leading_dense_layers_uses_int_freq() -> None:
    args = megatron_args(MIXTRAL_8X7B, cluster(8), JOB, Layout(tp=2, ep=4, etp=1, dp=4))
    assert value(args, "--moe-layer-freq") == "1"
    assert value(args, "--moe-token-dispatcher-type") == "alltoall"
    assert "--moe-grouped-gemm" in args
    assert value(args, "--expert-tensor-parallel-size") == "1"


def test_dense_model_emits_no_expert_flags() -> None:
    args = megatron_args(LLAMA8B, cluster(8), JOB, Layout(tp=8))
    assert not [a for a in args if a.startswith(("--expert", "--moe", "--num-experts"))]


def test_vpp_flag_only_when_interleaved() -> None:
    with_vpp = megatron_args(LLAMA8B, cluster(8), JOB, Layout(pp=4, vpp=2, dp=2))
    without = megatron_args(LLAMA8B, cluster(8), JOB, Layout(pp=4, dp=2))
    assert value(with_vpp, "--num-virtual-stages-per-pipeline-rank") == "2"
    assert "--num-virtual-stages-per-pipeline-rank" not in without


def test_full_recompute_flags() -> None:
    args = megatron_args(LLAMA8B, cluster(8), JOB, Layout(dp=8, recompute="full"))
    assert value(args, "--recompute-granularity") == "full"
    assert value(args, "--recompute-method") == "uniform"
    assert value(args, "--recompute-num-layers") == "1"


def test_selective_recompute_has_no_method() -> None:
    args = megatron_args(LLAMA8B, cluster(8), JOB, Layout(dp=8, recompute="selective"))
    assert "--recompute-method" not in args and "--recompute-num-layers" not in args


@pytest.mark.parametrize(
    ("sharding", "present", "absent"),
    [
        ("optimizer", ["--use-distributed-optimizer", "--overlap-param-gather"],
         ["--use-torch-fsdp2"]),
        ("full", ["--use-torch-fsdp2"], ["--use-distributed-optimizer", "--overlap-param-gather"]),
        ("none", ["--overlap-grad-reduce"],
         ["--use-distributed-optimizer", "--overlap-param-gather", "--use-torch-fsdp2"]),
    ],
)  # fmt: skip
def test_optimizer_sharding_flags(sharding: Any, present: list[str], absent: list[str]) -> None:
    args = megatron_args(LLAMA8B, cluster(8), JOB, Layout(dp=8, optimizer_sharding=sharding))
    assert all(flag in args for flag in present)
    assert not any(flag in args for flag in absent)


@pytest.mark.parametrize(
    ("gpu", "stack", "recipe"),
    [
        (H100, {}, "tensorwise"),  # the planner's default on Hopper (planner.fp8_recipes)
        (B200, {}, "mxfp8"),
        (H100, {"te_version": "2.1"}, "delayed"),  # current scaling needs TE 2.2
        (H100, {"fp8_recipe": "blockwise"}, "blockwise"),
        (B200, {"fp8_recipe": "delayed"}, "delayed"),
        (H100, {"megatron_core_version": "0.11"}, None),  # no --fp8-recipe before core 0.12
    ],
)  # fmt: skip
def test_fp8_recipe_flag(gpu: GPUSpec, stack: dict[str, str], recipe: str | None) -> None:
    job = TrainingJob(seq_length=8192, global_batch_size=128, precision="fp8", **stack)  # type: ignore[arg-type]
    args = megatron_args(LLAMA8B, cluster(8, gpu), job, Layout(dp=8))
    assert value(args, "--fp8-format") == "hybrid"
    assert (value(args, "--fp8-recipe") if "--fp8-recipe" in args else None) == recipe
    assert "--bf16" in args


def test_bf16_job_has_no_fp8_flags() -> None:
    args = megatron_args(LLAMA8B, cluster(8), JOB, Layout(dp=8))
    assert "--bf16" in args and "--fp8-format" not in args


def test_max_position_embeddings_covers_the_sequence() -> None:
    short = replace(LLAMA8B, max_position_embeddings=4096)
    args = megatron_args(short, cluster(8), JOB, Layout(dp=8))
    assert value(args, "--max-position-embeddings") == "8192"


def test_mha_model_has_no_gqa_flag() -> None:
    mha = replace(LLAMA8B, num_query_groups=None)
    assert "--group-query-attention" not in megatron_args(mha, cluster(8), JOB, Layout(dp=8))


def test_biased_model_keeps_biases() -> None:
    gpt = replace(
        LLAMA8B, add_bias_linear=True, position_embedding_type="learned_absolute",
        rotary_base=None, use_rope_scaling=False,  # rotary settings need rotary embeddings
    )  # fmt: skip
    args = megatron_args(gpt, cluster(8), JOB, Layout(dp=8))
    assert "--disable-bias-linear" not in args
    assert value(args, "--position-embedding-type") == "learned_absolute"


# --- environment and command ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "layout", "needed"),
    [
        (H100, Layout(tp=2, dp=4), True),
        (H100, Layout(cp=2, dp=4), True),
        (H100, Layout(dp=8), False),
        (B200, Layout(tp=8), False),  # rule 30 applies before Blackwell only
        (H100, Layout(tp=2, dp=4, optimizer_sharding="full"), False),  # FSDP2 skips the assert
    ],
)
def test_cuda_device_max_connections(gpu: GPUSpec, layout: Layout, needed: bool) -> None:
    env = launch_spec(LLAMA8B, cluster(8, gpu), JOB, layout).env
    assert (env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1") is needed
    assert ("CUDA_DEVICE_MAX_CONNECTIONS" in env) is needed


def test_command_is_a_torchrun_line_with_quoted_args() -> None:
    spec = launch_spec(DEEPSEEK, cluster(64), JOB, Layout(tp=2, ep=8, etp=1, dp=32))
    words = shlex.split(spec.command)
    start = words.index("torchrun")
    assert words[:start] == [f"{k}={v}" for k, v in spec.env.items()]
    assert words[start : start + 7] == [
        "torchrun", "--nproc-per-node", "8", "--nnodes", "8", "--node-rank", "$NODE_RANK",
    ]  # fmt: skip
    script = words.index("pretrain_gpt.py")
    assert words[script + 1 :] == spec.args
    assert "'([0]*3+[1]*58)'" in spec.command


def test_single_node_command_uses_only_the_gpus_asked_for() -> None:
    spec = launch_spec(LLAMA8B, cluster(4), JOB, Layout(dp=4), script="train.py")
    assert "--nproc-per-node 4 --nnodes 1" in spec.command and " train.py " in spec.command


def test_notes_mention_tokenizer_and_padded_vocab() -> None:
    spec = launch_spec(LLAMA8B, cluster(8), JOB, Layout(tp=8))
    assert any("128256" in n and "129024" in n for n in spec.notes)  # catalog-facts §1.9


# --- parser errors ----------------------------------------------------------------------------


def test_parse_rejects_unknown_flags() -> None:
    args = [*megatron_args(LLAMA8B, cluster(8), JOB, Layout(dp=8)), "--frobnicate"]
    with pytest.raises(SpecError, match="--frobnicate"):
        parse_megatron_args(args, world_size=8)


def test_parse_rejects_world_size_not_divisible() -> None:
    args = megatron_args(LLAMA8B, cluster(8), JOB, Layout(tp=4, dp=2))
    with pytest.raises(SpecError, match="world_size=6"):
        parse_megatron_args(args, world_size=6)


def test_parse_reads_megatron_style_list_pattern() -> None:
    args = megatron_args(DEEPSEEK, cluster(64), JOB, Layout(tp=2, ep=8, etp=1, dp=32))
    i = args.index("--moe-layer-freq") + 1
    args[i] = str([0] * 3 + [1] * 58)  # a literal list instead of the product form
    fields = parse_megatron_args(args, world_size=64).model_fields
    assert (fields["moe_layer_freq"], fields["moe_first_dense_layers"]) == (1, 3)
    assert ast.literal_eval(args[i])[:4] == [0, 0, 0, 1]


def test_parse_reads_a_hand_written_script_leniently() -> None:
    # megatron-facts §8 case B: A + --num-layers-per-virtual-pipeline-stage 8 gives v = 2
    argv = shlex.split(
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm "
        "--seq-length 8192 --max-position-embeddings 8192 --micro-batch-size 1 "
        "--global-batch-size 128 --bf16 --tensor-model-parallel-size 2 "
        "--pipeline-model-parallel-size 2 --sequence-parallel --recompute-activations "
        "--use-distributed-optimizer --num-layers-per-virtual-pipeline-stage 8 "
        "--lr 3e-4 --data-path /data/x"
    )
    parsed = parse_megatron_args(argv, world_size=16, strict=False)
    assert parsed.layout == Layout(
        tp=2,
        pp=2,
        vpp=2,
        dp=4,
        recompute="selective",
        sequence_parallel=True,
        etp=2,
        moe_a2a_overlap=False,  # a script without the flag runs without it
    )


def test_parse_without_world_size_assumes_one_replica() -> None:
    args = megatron_args(LLAMA8B, cluster(8), JOB, Layout(tp=4, dp=2))
    assert parse_megatron_args(args).layout.dp == 1


def test_top1_routing_emits_pre_softmax() -> None:
    # K = 1 with the softmax router is rejected by TransformerConfig without it (rule 35)
    top1 = replace(MIXTRAL_8X7B, moe_router_topk=1)
    layout = Layout(tp=1, ep=8, dp=8)
    assert "--moe-router-pre-softmax" in megatron_args(top1, cluster(8), JOB, layout)
    assert "--moe-router-pre-softmax" not in megatron_args(MIXTRAL_8X7B, cluster(8), JOB, layout)


# --- rotary position embedding ----------------------------------------------------------------


def test_llama31_emits_rotary_base_and_rope_scaling() -> None:
    # without --rotary-base Megatron trains with theta 10000, a different model (catalog-facts §1.3)
    for model in (LLAMA8B, load_model("llama3.1-8b")):
        args = megatron_args(model, cluster(8), JOB, Layout(tp=8))
        assert value(args, "--rotary-base") == "500000"
        assert "--use-rope-scaling" in args
        assert "--rope-scaling-factor" not in args  # 8 is Megatron's default
        assert "--rotary-percent" not in args and "--rope-type" not in args
        assert "--rotary-scaling-factor" not in args


def test_llama32_rope_scaling_factor_is_emitted() -> None:
    llama32 = replace(LLAMA8B, rope_scaling_factor=32.0)
    args = megatron_args(llama32, cluster(8), JOB, Layout(tp=8))
    assert value(args, "--rope-scaling-factor") == "32"


def test_deepseek_mla_emits_the_yarn_flags() -> None:
    # the CLI's --rotary-scaling-factor 1.0 and --mscale-all-dim 0.0 override DeepSeek's (§1.11)
    for model in (DEEPSEEK, load_model("deepseek-v3")):
        args = megatron_args(model, cluster(64), JOB, Layout(tp=2, ep=8, etp=1, dp=32))
        assert value(args, "--rope-type") == "yarn"
        assert value(args, "--rotary-scaling-factor") == "40"
        assert value(args, "--mscale") == "1"
        assert value(args, "--mscale-all-dim") == "1"
        assert value(args, "--rotary-base") == "10000"
        assert value(args, "--position-embedding-type") == "rope"
        assert "--use-rope-scaling" not in args


def test_mla_without_yarn_asks_for_plain_rope() -> None:
    plain = replace(DEEPSEEK, rotary_scaling_factor=None, mscale=None, mscale_all_dim=None)
    args = megatron_args(plain, cluster(64), JOB, Layout(tp=2, ep=8, etp=1, dp=32))
    assert value(args, "--rope-type") == "rope"
    assert "--rotary-scaling-factor" not in args and "--mscale" not in args
    assert parse_megatron_args(args).model_fields["rotary_scaling_factor"] is None


def test_gpt_oss_yarn_emits_base_and_factor() -> None:
    model = load_model("gpt-oss-120b")
    args = megatron_args(model, cluster(8), JOB, Layout(tp=1, ep=8, dp=8))
    assert value(args, "--position-embedding-type") == "yarn"
    assert value(args, "--rotary-base") == "150000"
    assert value(args, "--rotary-scaling-factor") == "32"
    assert "--rope-type" not in args and "--mscale" not in args  # not given for gpt-oss
    notes = launch_spec(model, cluster(8), JOB, Layout(tp=1, ep=8, dp=8)).notes
    assert any("yarn" in n and "config dump" in n for n in notes)


def test_nemotron_emits_rotary_percent() -> None:
    args = megatron_args(load_model("nemotron-4-15b"), cluster(8), JOB, Layout(tp=8))
    assert value(args, "--rotary-percent") == "0.5"
    assert value(args, "--rotary-base") == "10000"


def test_learned_positions_emit_no_rotary_flags() -> None:
    args = megatron_args(load_model("gpt3-175b"), cluster(8), JOB, Layout(tp=8))
    assert value(args, "--position-embedding-type") == "learned_absolute"
    assert not [a for a in args if a.startswith(("--rotary", "--rope", "--use-rope", "--mscale"))]


def test_catalog_models_round_trip_their_rotary_settings() -> None:
    rotary = ("rotary_base", "rotary_percent", "use_rope_scaling", "rope_scaling_factor",
              "rotary_scaling_factor", "mscale", "mscale_all_dim")  # fmt: skip
    for slug in list_models():
        model = load_model(slug)
        layout = Layout(tp=8, ep=8 if model.is_moe else 1)
        fields = parse_megatron_args(megatron_args(model, cluster(8), JOB, layout)).model_fields
        assert {k: fields[k] for k in rotary} == {k: getattr(model, k) for k in rotary}, slug


def test_rotary_notes_replace_the_set_by_hand_note() -> None:
    for model in (DEEPSEEK, LLAMA8B):
        notes = launch_spec(model, cluster(64), JOB, Layout(tp=8, ep=8, dp=8)).notes
        assert not any("rotary" in n for n in notes)
    unset = replace(LLAMA8B, rotary_base=None, use_rope_scaling=False)
    notes = launch_spec(unset, cluster(8), JOB, Layout(tp=8)).notes
    assert any("rotary_base" in n and "10000" in n for n in notes)


def test_parse_reads_hand_written_rotary_flags() -> None:
    argv = [*megatron_args(replace(LLAMA8B, rotary_base=None, use_rope_scaling=False),
                           cluster(8), JOB, Layout(tp=8)),
            "--rotary-base", "5e5", "--use-rope-scaling", "--rope-scaling-factor", "32",
            "--rotary-percent", "0.5"]  # fmt: skip
    fields = parse_megatron_args(argv).model_fields
    assert fields["rotary_base"] == 500000.0 and fields["use_rope_scaling"] is True
    assert fields["rope_scaling_factor"] == 32.0 and fields["rotary_percent"] == 0.5


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"rotary_base": 0}, "rotary_base"),
        ({"rotary_base": "500000"}, "rotary_base"),
        ({"rotary_base": float("inf")}, "rotary_base"),
        ({"rotary_percent": 0.0}, "rotary_percent"),
        ({"rotary_percent": 1.5}, "rotary_percent"),
        ({"rope_scaling_factor": 0.0}, "rope_scaling_factor"),
        ({"use_rope_scaling": 1}, "use_rope_scaling"),
        ({"rotary_scaling_factor": 40.0}, "rotary_scaling_factor"),  # YaRN on a plain-rope model
        ({"position_embedding_type": "yarn", "rotary_scaling_factor": 0.5},
         "rotary_scaling_factor"),
        ({"position_embedding_type": "yarn", "mscale": 1.0}, "mscale"),
        ({"position_embedding_type": "yarn", "rotary_scaling_factor": 4.0, "mscale": 0.0},
         "mscale"),
        ({"position_embedding_type": "yarn", "rotary_scaling_factor": 4.0,
          "mscale_all_dim": -1.0}, "mscale_all_dim"),
        ({"position_embedding_type": "learned_absolute"}, "rotary_base"),
        ({"position_embedding_type": "yarn"}, "use_rope_scaling"),
    ],
)  # fmt: skip
def test_rotary_fields_are_validated(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        replace(LLAMA8B, **overrides)
    assert err.value.field == field


def test_rotary_numbers_are_stored_as_floats() -> None:
    assert isinstance(LLAMA8B.rotary_base, float) and LLAMA8B.rotary_base == 500000.0
    assert ModelSpec.from_dict(LLAMA8B.to_dict()) == LLAMA8B
