"""Where the short runs of a plan fit: the node counts to try and the stage-reduced proxy that
fits a given number of GPUs (issue 12 item 10).

A plan whose one model replica needs more GPUs than a short run can have (MT-NLG 530B at
tp 8 x pp 35 is 280 GPUs) is measured on a proxy that keeps what sets the per-GPU work and the
communication the plan's prediction depends on: the same tp, cp and ep groups, the same
micro-batch and sequence (the same GEMM, attention and message shapes) and the same layers per
pipeline stage (the same memory per GPU and per-stage compute), with fewer pipeline stages and
so fewer layers in all. NVIDIA's benchmark recipes measure large models the same way, at fewer
layers than the published model. It keeps at least two stages when the plan has them, so the
pipeline send/recv and its bubble are still measured; fewer layers per stage, where even that
does not fit in memory, are the proxies of :func:`planner.calibration.suggest._models`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.specs import ClusterSpec, Layout, ModelSpec, SpecError

SHORT_RUN_NODES = (1, 2, 4)
"""Node counts tried for every plan (the smallest runs; a plan whose replica does not fit in
them also gets its fewest nodes and twice that, for a data-parallel pair)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StageFit:
    """The plan's model and layout cut to a number of GPUs."""

    model: ModelSpec
    layout: Layout
    """The layout with the proxy's stages (dp not yet set)."""
    change: str
    """How it differs from the plan's stages, in words ('' when it keeps them)."""


def min_stages(layout: Layout) -> int:
    """Fewest pipeline stages a proxy keeps: two when the plan pipelines, else one."""
    return min(layout.pp, 2)


def fewest_nodes(layout: Layout, gpus_per_node: int, limit: int) -> int | None:
    """The fewest nodes (up to ``limit``) that hold one replica of the smallest proxy:
    tp x cp x stages GPUs with stages from the plan's pp down to ``min_stages`` (None: none)."""
    group = layout.tp * layout.cp
    for nodes in range(1, limit + 1):
        gpus = nodes * gpus_per_node
        if gpus % group == 0 and _stages(layout, gpus // group) is not None:
            return nodes
    return None


def node_counts(cluster: ClusterSpec, layout: Layout, max_nodes: int | None) -> list[int]:
    """The node counts to try for a variant of the plan, within the cluster and the budget."""
    limit = min(cluster.num_nodes, max_nodes or cluster.num_nodes)
    counts = set(SHORT_RUN_NODES)
    least = fewest_nodes(layout, cluster.gpus_per_node, limit)
    if least is not None:
        counts |= {least, 2 * least}
    return sorted(n for n in counts if n <= limit)


def _stages(layout: Layout, replicas_room: int) -> int | None:
    """The most stages, at most the plan's, that divide the model-parallel room
    (GPUs / (tp x cp)) and keep at least ``min_stages``."""
    for p in range(min(layout.pp, replicas_room), min_stages(layout) - 1, -1):
        if replicas_room % p == 0:
            return p
    return None


def fit_stages(model: ModelSpec, layout: Layout, gpus: int) -> StageFit | None:
    """The plan's model and layout on ``gpus`` GPUs: itself where a replica divides them, else
    the proxy with fewer stages of the same layers per stage (None: no proxy fits)."""
    group = layout.tp * layout.cp
    if gpus % group:
        return None
    if gpus % (group * layout.pp) == 0:
        return StageFit(model=model, layout=layout, change="")
    stages = _stages(layout, gpus // group)
    if stages is None:
        return None
    per_stage = model.num_layers // layout.pp
    # interleaving needs the stage's layers to split into vpp chunks (Narayanan et al. 2021 §2.2)
    vpp = layout.vpp if stages > 1 and per_stage % layout.vpp == 0 else 1
    layers = stages * per_stage
    try:
        proxy = replace(model, num_layers=layers, name=f"{model.name} ({layers} layers)")
        lay = replace(layout, pp=stages, vpp=vpp)
    except SpecError:  # e.g. a layer pattern that names more layers
        return None
    return StageFit(
        model=proxy,
        layout=lay,
        change=f"pp {layout.pp} -> {stages}",
    )


def no_run_reason(
    model: ModelSpec, cluster: ClusterSpec, layout: Layout, max_nodes: int | None
) -> str:
    """Why no short run was proposed, in words: the smallest proxy's size against the cluster
    and the budget, or memory."""
    group = layout.tp * layout.cp
    least = fewest_nodes(layout, cluster.gpus_per_node, 10**6)
    shape = f"tp {layout.tp} x cp {layout.cp} x pp {min_stages(layout)}"
    if least is None:  # tp x cp is no whole number of nodes' worth of stages
        return (
            f"no proxy of this plan fits whole nodes of {cluster.gpus_per_node} GPUs "
            f"(tp x cp = {group})"
        )
    need = f"the smallest proxy of this plan ({shape}) needs {least} node(s) of "
    need += f"{cluster.gpus_per_node} GPUs"
    if least > cluster.num_nodes:
        return f"{need}, more than the cluster's {cluster.num_nodes}: measure on a larger cluster"
    if max_nodes is not None and least > max_nodes:
        return (
            f"{need}, more than the budget of {max_nodes} node(s) per run: allow at least "
            f"{least} (max_nodes; --max-nodes in the CLI)"
        )
    return (
        f"no run near this plan fits in memory on up to "
        f"{min(cluster.num_nodes, max_nodes or cluster.num_nodes)} node(s), even with fewer "
        f"layers per stage ({model.name})"
    )


def replica_note(cluster: ClusterSpec, layout: Layout) -> str | None:
    """Said when the plan's replica is larger than the short runs: what the proxies keep."""
    gpus = layout.tp * layout.cp * layout.pp
    if gpus <= max(SHORT_RUN_NODES) * cluster.gpus_per_node:
        return None
    nodes = math.ceil(gpus / cluster.gpus_per_node)
    return (
        f"one replica of this plan needs {gpus} GPUs ({nodes} nodes): the runs measure proxies "
        "with fewer pipeline stages (the same tp, cp, ep and micro-batch; the plan's layers per "
        "stage where they fit in memory without its data-parallel optimizer sharding, else fewer)"
    )
