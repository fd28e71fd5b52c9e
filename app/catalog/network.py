"""The cluster description (issue 12 item 2): NICs per node, their rate, the intra-node topology.

Shared by user clusters (``ClusterPresetSpec``) and the requests that describe a cluster inline
(``app.planning.schemas``), so the API, the CLI flags, batch columns and the web form accept and
refuse the same things. ``inter_node_bandwidth_bytes_per_s`` keeps meaning network bandwidth per
GPU; NICs x rate / GPUs per node is the same number said the way a datasheet says it
(``planner.ClusterSpec``), so a request may give either, or both when they agree.
"""

from __future__ import annotations

import math

from pydantic import Field

from app.core.schemas import RequestModel
from planner.specs import IntraNodeTopology, SpecError, check_nic_pair

NICS_HELP = "network adapters per node; with nic_bandwidth_bytes_per_s it sets the per-GPU network"
NIC_RATE_HELP = "one NIC's rate, bytes/s one direction (400 Gb/s NDR = 50e9; 200 Gb/s HDR = 25e9)"
TOPOLOGY_HELP = (
    "switch (NVSwitch: every GPU pair at full scale-up bandwidth) or mesh (direct links, AMD "
    "xGMI or V100 NVLink boards: a pair gets 1/(gpus_per_node-1) of it)"
)
TOPOLOGY_LABELS = {"switch": "NVSwitch", "mesh": "mesh (direct links)"}
BANDWIDTH_GROUP = ("inter_node_bandwidth_bytes_per_s", "nics_per_node", "nic_bandwidth_bytes_per_s")
"""Fields that say the same thing (the network per GPU): a cluster's are taken together or not."""
AGREEMENT = 1e-6
"""Relative difference under which a per-GPU bandwidth and NICs x rate agree (float rounding)."""


class NetworkFields(RequestModel):
    """The cluster-description fields; None = the preset's (or one NIC per GPU)."""

    nics_per_node: int | None = Field(default=None, ge=1, le=1024, description=NICS_HELP)
    nic_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, le=1e13, description=NIC_RATE_HELP
    )
    intra_node_topology: IntraNodeTopology | None = Field(default=None, description=TOPOLOGY_HELP)


def check_network(
    *,
    nics_per_node: int | None,
    nic_bandwidth_bytes_per_s: float | None,
    inter_node_bandwidth_bytes_per_s: float | None,
    gpus_per_node: int,
) -> float | None:
    """The per-GPU network bandwidth the description implies (None when no NICs are given);
    SpecError naming the field when NICs come without a rate (or the reverse) or when a per-GPU
    bandwidth given beside them disagrees."""
    nics, rate = nics_per_node, nic_bandwidth_bytes_per_s
    check_nic_pair(nics, rate)
    if nics is None or rate is None:
        return None
    per_gpu = nics * rate / gpus_per_node  # planner.ClusterSpec: nics x rate / GPUs per node
    given_bw = inter_node_bandwidth_bytes_per_s
    if given_bw is not None and not math.isclose(given_bw, per_gpu, rel_tol=AGREEMENT):
        raise SpecError(
            f"inter_node_bandwidth_bytes_per_s={given_bw:g} disagrees with nics_per_node={nics} x "
            f"nic_bandwidth_bytes_per_s={rate:g} / gpus_per_node={gpus_per_node} = {per_gpu:g} "
            "bytes/s per GPU; give the per-GPU bandwidth or the NICs, not both",
            field="inter_node_bandwidth_bytes_per_s",
        )
    return per_gpu
