"""Catalog additions of issue 13: host links, host memory, and the V100 founding-case cluster."""

from __future__ import annotations

import pytest

from models_db.catalog import cluster_spec, list_clusters, list_gpus, load_gpu


@pytest.mark.parametrize("slug", list_gpus())
def test_every_gpu_has_a_sourced_host_link(slug: str) -> None:
    gpu = load_gpu(slug)
    assert gpu.host_link_bandwidth_bytes_per_s is not None
    assert 10e9 <= gpu.host_link_bandwidth_bytes_per_s <= 500e9
    assert "host_link_bandwidth_bytes_per_s" in gpu.sources


@pytest.mark.parametrize("slug", list_clusters())
def test_every_cluster_has_host_memory(slug: str) -> None:
    spec = cluster_spec(slug, 8)
    assert spec.host_memory_bytes_per_gpu is not None and spec.host_memory_bytes_per_gpu > 32e9


def test_v100_is_fp16_only_on_a_four_gpu_nvlink_mesh() -> None:
    c = cluster_spec("v100-sxm2-4x", 8)
    assert c.num_nodes == 2 and c.gpus_per_node == 4
    assert not c.gpu.bf16_supported and c.gpu.peak_fp8_flop_per_s is None
    assert c.gpu.hbm_bytes == 32510 * 2**20
    assert c.gpu.architecture == "volta"
    assert "[U]" in c.gpu.sources["all"]
