"""The catalog loader: every file loads, sources are recorded, errors name close matches."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from models_db.catalog import (
    CatalogError,
    cluster_spec,
    gpu_metadata,
    list_clusters,
    list_gpus,
    list_models,
    load_cluster_preset,
    load_gpu,
    load_model,
    model_metadata,
    resolve_model,
)
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, SpecError

MODELS = [
    "deepseek-v3", "gpt-oss-120b", "gpt3-175b", "grok-1", "llama2-13b", "llama2-70b",
    "llama2-7b", "llama3.1-405b", "llama3.1-70b", "llama3.1-8b", "mixtral-8x22b",
    "mixtral-8x7b", "nemotron-4-15b", "nemotron-4-340b", "qwen3-235b-a22b", "qwen3-30b-a3b",
]  # fmt: skip
GPUS = [
    "a100-sxm4-40gb", "a100-sxm4-80gb", "b200-sxm-180gb", "b300-sxm-288gb", "gb200-186gb",
    "gb300-288gb", "h100-sxm-80gb", "h200-sxm-141gb", "h800-sxm-80gb", "mi300x-192gb",
    "v100-sxm2-32gb",
]  # fmt: skip
MiB = 2**20


def test_list_models_is_exactly_the_catalog() -> None:
    assert list_models() == MODELS


def test_list_gpus_is_exactly_the_catalog() -> None:
    assert list_gpus() == GPUS


def test_nvl72_racks_are_one_nvlink_domain_and_take_64_gpu_domains_on_request() -> None:
    assert cluster_spec("gb200-nvl72", 144).num_nodes == 2
    assert cluster_spec("gb200-186gb", 256, gpus_per_node=64).num_nodes == 4
    with pytest.raises(SpecError, match="multiple of 72"):
        cluster_spec("gb300-nvl72", 256)


def test_dgx_presets_are_listed() -> None:
    assert {"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "dgx-h200", "dgx-b200"} <= set(
        list_clusters()
    )


@pytest.mark.parametrize("slug", MODELS)
def test_model_loads_with_its_slug_as_name(slug: str) -> None:
    model = load_model(slug)
    assert isinstance(model, ModelSpec)
    assert model.name == slug


@pytest.mark.parametrize("slug", MODELS)
def test_model_sources_cite_known_fields(slug: str) -> None:
    model = load_model(slug)
    known = {f.name for f in fields(ModelSpec)} | {"all"}
    assert "all" in model.sources
    assert set(model.sources) <= known


@pytest.mark.parametrize("slug", GPUS)
def test_gpu_loads_with_sources_for_every_number(slug: str) -> None:
    gpu = load_gpu(slug)
    assert isinstance(gpu, GPUSpec)
    numbers = {"hbm_bytes", "hbm_bandwidth_bytes_per_s", "peak_bf16_flop_per_s",
               "peak_fp8_flop_per_s", "intra_node_bandwidth_bytes_per_s"}  # fmt: skip
    assert numbers <= set(gpu.sources)


@pytest.mark.parametrize("slug", list_clusters())
def test_preset_builds_a_cluster_spec(slug: str) -> None:
    preset = load_cluster_preset(slug)
    spec = preset.spec(num_gpus=2 * preset.gpus_per_node)
    assert isinstance(spec, ClusterSpec)
    assert spec.gpu == load_gpu(preset.gpu)
    assert spec.num_nodes == 2
    assert "inter_node_bandwidth_bytes_per_s" in spec.sources


# --- numbers that are easy to get wrong (catalog-facts §3 pitfalls) ---------------------------


@pytest.mark.parametrize(
    ("slug", "mib"),
    [
        ("a100-sxm4-40gb", 40960),
        ("a100-sxm4-80gb", 81920),
        ("h100-sxm-80gb", 81559),
        ("h200-sxm-141gb", 143771),
        ("b200-sxm-180gb", 183359),
        ("mi300x-192gb", 196592),
    ],
)
def test_hbm_is_the_tool_reported_mib_not_marketed_gb(slug: str, mib: int) -> None:
    assert load_gpu(slug).hbm_bytes == mib * MiB


@pytest.mark.parametrize(
    ("slug", "tflops"),
    [("a100-sxm4-80gb", 312), ("h100-sxm-80gb", 989.4), ("h200-sxm-141gb", 989.4),
     ("b200-sxm-180gb", 2250), ("mi300x-192gb", 1307.4)],
)  # fmt: skip
def test_bf16_peak_is_dense_not_sparse(slug: str, tflops: float) -> None:
    assert load_gpu(slug).peak_bf16_flop_per_s == pytest.approx(tflops * 1e12)


def test_a100_has_no_fp8_peak() -> None:
    assert load_gpu("a100-sxm4-40gb").peak_fp8_flop_per_s is None
    assert load_gpu("a100-sxm4-80gb").peak_fp8_flop_per_s is None


@pytest.mark.parametrize(
    ("slug", "gb_per_s"),
    [("a100-sxm4-40gb", 300), ("h100-sxm-80gb", 450), ("b200-sxm-180gb", 900)],
)
def test_nvlink_bandwidth_is_per_direction(slug: str, gb_per_s: float) -> None:
    assert load_gpu(slug).intra_node_bandwidth_bytes_per_s == pytest.approx(gb_per_s * 1e9)


def test_qwen3_head_dim_is_128_not_h_over_a() -> None:
    assert load_model("qwen3-30b-a3b").head_dim == 128
    assert load_model("qwen3-235b-a22b").head_dim == 128


def test_gpt_oss_head_dim_is_64() -> None:
    assert load_model("gpt-oss-120b").head_dim == 64


def test_deepseek_v3_has_three_leading_dense_layers() -> None:
    pattern = load_model("deepseek-v3").moe_layer_pattern()
    assert pattern[:4] == [False, False, False, True]
    assert sum(pattern) == 58


def test_nemotron_uses_an_ungated_mlp() -> None:
    assert load_model("nemotron-4-15b").swiglu is False
    assert load_model("nemotron-4-340b").swiglu is False


@pytest.mark.parametrize("slug", MODELS)
def test_rope_models_set_rotary_base_or_say_why_not(slug: str) -> None:
    # without --rotary-base Megatron uses theta 10000 (megatron-facts §1.4)
    model = load_model(slug)
    rotary = model.multi_latent_attention or model.position_embedding_type in ("rope", "yarn")
    if rotary:
        assert model.rotary_base is not None or "rotary_base" in model.sources, slug
    else:
        assert model.rotary_base is None
    assert "rotary_base" in model.sources


@pytest.mark.parametrize(
    ("slug", "base", "extra"),
    [
        ("llama2-7b", 1e4, {}), ("llama2-13b", 1e4, {}), ("llama2-70b", 1e4, {}),
        ("llama3.1-8b", 5e5, {"use_rope_scaling": True, "rope_scaling_factor": 8.0}),
        ("llama3.1-70b", 5e5, {"use_rope_scaling": True}),
        ("llama3.1-405b", 5e5, {"use_rope_scaling": True}),
        ("mixtral-8x7b", 1e6, {}), ("mixtral-8x22b", 1e6, {}),
        ("qwen3-30b-a3b", 1e6, {}), ("qwen3-235b-a22b", 1e6, {}),
        ("nemotron-4-15b", 1e4, {"rotary_percent": 0.5}),
        ("nemotron-4-340b", 1e4, {"rotary_percent": 0.5}),
        ("grok-1", 1e4, {}),
        ("deepseek-v3", 1e4,
         {"rotary_scaling_factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0}),
        ("gpt-oss-120b", 1.5e5, {"rotary_scaling_factor": 32.0, "mscale": None}),
        ("gpt3-175b", None, {"position_embedding_type": "learned_absolute"}),
    ],
)  # fmt: skip
def test_rotary_settings_follow_catalog_facts(
    slug: str, base: float | None, extra: dict[str, Any]
) -> None:
    model = load_model(slug)
    assert model.rotary_base == base
    for name, expected in extra.items():
        assert getattr(model, name) == expected, name
    if "rotary_percent" not in extra:
        assert model.rotary_percent == 1.0
    if "use_rope_scaling" not in extra:
        assert model.use_rope_scaling is False


def test_llama2_7b_is_multi_head_attention() -> None:
    assert load_model("llama2-7b").query_groups == 32


# --- metadata --------------------------------------------------------------------------------


def test_model_metadata_holds_published_counts() -> None:
    meta = model_metadata("mixtral-8x7b")
    assert meta["published_params"]["total"] == pytest.approx(46.7e9)
    assert meta["published_params"]["active"] == pytest.approx(12.9e9)


def test_model_metadata_is_a_copy() -> None:
    model_metadata("llama3.1-8b")["published_params"]["total"] = 1
    assert model_metadata("llama3.1-8b")["published_params"]["total"] == pytest.approx(8e9)


def test_gpu_metadata_holds_the_measured_cuda_visible_bytes() -> None:
    assert gpu_metadata("h100-sxm-80gb")["cuda_visible_bytes"] == 85_017_493_504


# --- cluster_spec --------------------------------------------------------------------------------


def test_cluster_spec_from_a_gpu_slug_uses_its_dgx_preset() -> None:
    spec = cluster_spec("h100-sxm-80gb", 64)
    assert spec.name == "dgx-h100"
    assert spec.inter_node_bandwidth_bytes_per_s == pytest.approx(50e9)


def test_a100_network_is_hdr_200() -> None:
    assert cluster_spec("a100-sxm4-80gb", 16).inter_node_bandwidth_bytes_per_s == pytest.approx(
        25e9
    )


def test_cluster_spec_for_mi300x_has_eight_per_node_and_400g() -> None:
    spec = cluster_spec("mi300x-192gb", 32)
    assert (spec.gpus_per_node, spec.num_nodes) == (8, 4)
    assert spec.inter_node_bandwidth_bytes_per_s == pytest.approx(50e9)


def test_cluster_spec_overrides_gpus_per_node() -> None:
    assert cluster_spec("dgx-b200", 16, gpus_per_node=4).num_nodes == 4


def test_unknown_cluster_lists_close_matches() -> None:
    with pytest.raises(CatalogError, match="did you mean dgx-h100"):
        cluster_spec("dgx-h10", 8)


# --- errors -----------------------------------------------------------------------------------


def test_unknown_model_lists_close_matches() -> None:
    with pytest.raises(CatalogError, match=r"did you mean llama3\.1-8b"):
        load_model("llama3-8b")


def test_catalog_error_is_a_spec_error_and_a_key_error() -> None:
    with pytest.raises(SpecError):
        load_gpu("h100")
    with pytest.raises(KeyError):
        load_gpu("h100")


def test_unknown_gpu_suggests_the_h100() -> None:
    with pytest.raises(CatalogError, match="h100-sxm-80gb"):
        load_gpu("h100-sxm")


# --- resolve_model --------------------------------------------------------------------------


def test_resolve_model_accepts_a_slug() -> None:
    assert resolve_model("llama2-70b") == load_model("llama2-70b")


def test_resolve_model_accepts_an_inline_spec_dict() -> None:
    data = load_model("mixtral-8x7b").to_dict() | {"name": "mine", "display_name": "x"}
    model = resolve_model(data)
    assert model.name == "mine"
    assert model.num_experts == 8


def test_resolve_model_accepts_an_inline_hf_dict() -> None:
    hf = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
          "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 32000,
          "max_position_embeddings": 4096}  # fmt: skip
    model = resolve_model(hf)
    assert model.hidden_size == 4096
    assert model.num_query_groups is None


def test_resolve_model_reads_a_json_spec_file(tmp_path: Path) -> None:
    path = tmp_path / "my-model.json"
    data = load_model("llama3.1-8b").to_dict()
    del data["name"]
    path.write_text(json.dumps(data))
    model = resolve_model(str(path))
    assert model.name == "my-model"
    assert model.ffn_hidden_size == 14336


def test_resolve_model_reads_a_yaml_spec_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "name: tiny\nnum_layers: 2\nhidden_size: 256\nffn_hidden_size: 1024\n"
        "num_attention_heads: 4\nvocab_size: 1000\n"
    )
    assert resolve_model(path).num_layers == 2


MIXTRAL_HF = {
    "architectures": ["MixtralForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
    "vocab_size": 32000, "max_position_embeddings": 32768, "tie_word_embeddings": False,
}  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "name"),
    [
        ({"_name_or_path": "mistralai/Mixtral-8x7B-v0.1"}, "mistralai/Mixtral-8x7B-v0.1"),
        ({"_name_or_path": "/data/ckpt/mixtral-base/"}, "mixtral-base"),
        ({}, "MixtralForCausalLM"),
    ],
)
def test_resolve_model_names_an_hf_config_from_the_config(
    tmp_path: Path, extra: dict[str, str], name: str
) -> None:
    """Not after its folder: a hub download sits in snapshots/<commit hash>/config.json."""
    folder = tmp_path / "snapshots" / "0123abcd"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({**MIXTRAL_HF, **extra}))
    model = resolve_model(folder / "config.json")
    assert model.name == name
    assert model.num_experts == 8


def test_resolve_model_unknown_string_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="not an existing file"):
        resolve_model("no-such-model")


def test_preset_to_dict_names_its_gpu_by_slug() -> None:
    data = load_cluster_preset("dgx-h200").to_dict()
    assert data["gpu"] == "h200-sxm-141gb"
    assert data["inter_node_bandwidth_bytes_per_s"] == pytest.approx(50e9)
