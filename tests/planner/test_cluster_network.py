"""The cluster's network description (issue 12 item 2): NICs per node and intra-node topology."""

from __future__ import annotations

import pytest

from planner.specs import ClusterSpec, SpecError
from tests.planner.fixtures import H100


def _cluster(**kw: object) -> ClusterSpec:
    return ClusterSpec(name="c", gpu=H100, num_gpus=16, **kw)  # type: ignore[arg-type]


def test_nics_times_rate_set_the_network_bandwidth_per_gpu() -> None:
    c = _cluster(nics_per_node=4, nic_bandwidth_bytes_per_s=50e9)
    assert c.inter_node_bandwidth_bytes_per_s == pytest.approx(25e9)
    assert c.nics_per_gpu == 0.5
    assert ClusterSpec.from_dict(c.to_dict()) == c


def test_without_nics_the_per_gpu_bandwidth_is_kept() -> None:
    c = _cluster(inter_node_bandwidth_bytes_per_s=25e9)
    assert c.inter_node_bandwidth_bytes_per_s == 25e9
    assert c.nics_per_gpu == 1.0
    assert c.intra_node_topology == "switch"


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"nics_per_node": 4}, "nic_bandwidth_bytes_per_s"),
        ({"nic_bandwidth_bytes_per_s": 50e9}, "nics_per_node"),
        ({"nics_per_node": 0, "nic_bandwidth_bytes_per_s": 50e9}, "nics_per_node"),
        (
            {"nics_per_node": 8, "nic_bandwidth_bytes_per_s": float("nan")},
            "nic_bandwidth_bytes_per_s",
        ),
        ({"intra_node_topology": "ring"}, "intra_node_topology"),
    ],
)
def test_bad_network_descriptions_name_their_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as err:
        _cluster(**kw)
    assert err.value.field == field
