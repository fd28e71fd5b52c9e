"""What an inverse question that found nothing says (issue 13, the founding case).

Llama 3.1 70B on two nodes of four V100-32GB fits no layout. The answer states exactly why: the
least memory any valid layout needs with every saving Megatron-LM offers (full recompute,
Torch-FSDP2 or the distributed optimizer, optimizer offload 1.0, fine-grained activation
offload), term by term, against the memory line; and the best the planner can do instead: the
fewest GPUs of that type on which a layout fits, with its launch flags (``alternative``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from planner import PerformanceProfile
from planner.memory.options import GIB
from planner.search.inverse import InverseAnswer, fewest_gpus, longest_sequence
from planner.search.memory_floor import MemoryFloor, least_memory_layout, relaxed_constraints
from planner.specs import ClusterSpec

if TYPE_CHECKING:
    from app.planning.plan_request import PreparedPlan

MISSING_OFFLOAD = (
    "Megatron-LM offers no CPU offload of parameters or gradients (only of the Adam state, "
    "--optimizer-cpu-offload, and of activations, --cpu-offloading-num-layers and "
    "--offload-modules; megatron-facts 1.7 and rule 59), so the weights and gradients, sharded "
    "at most over all GPUs (optimizer_sharding=full, Torch-FSDP2), must fit in GPU memory"
)
ALTERNATIVE_FACTOR = 8
"""The fewest-GPU search for the alternative looks up to this many times the GPUs given."""


def _layout_words(floor: MemoryFloor) -> str:
    lay = floor.layout
    words = [
        f"tp={lay.tp} pp={lay.pp} cp={lay.cp} dp={lay.dp}",
        f"optimizer_sharding={lay.optimizer_sharding}",
        f"recompute={lay.recompute}",
    ]
    if lay.optimizer_offload_fraction:
        words.append(f"optimizer_offload_fraction={lay.optimizer_offload_fraction:g}")
    if lay.activation_offload_modules:
        words.append("activation_offload_modules=" + ",".join(lay.activation_offload_modules))
    return ", ".join(words)


def _floor_words(floor: MemoryFloor, cluster: ClusterSpec) -> str:
    t = floor.terms
    states = ", ".join(
        f"{name.removesuffix('_bytes')} {t.get(name, 0.0) / GIB:.1f} GiB"
        for name in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes")
    )
    return (
        f"with every memory saving Megatron-LM offers the least any valid layout needs is "
        f"{floor.total_bytes / GIB:.1f} GiB per GPU ({_layout_words(floor)}): {states}, against "
        f"{floor.limit_bytes / GIB:.1f} GiB ({floor.limit_bytes / cluster.gpu.hbm_bytes:.0%} of "
        f"{cluster.gpu.hbm_bytes / GIB:.1f} GiB); weights and gradients alone take "
        f"{(t.get('weights_bytes', 0.0) + t.get('gradients_bytes', 0.0)) / GIB:.1f} GiB, and the "
        "optimizer keeps its fp32 master weights (and in fp16 its fp32 gradient copy) on the "
        "GPU: only the Adam moments go to the host"
    )


def explain_no_fit(
    question: str,
    probes: tuple[tuple[int, int], ...],
    prepared: PreparedPlan,
    profile: PerformanceProfile,
) -> tuple[str, InverseAnswer | None]:
    """(why nothing fits, the answer on the fewest GPUs that fit (its value is the longest
    sequence there for a seq_length question), or None)."""
    cluster, job = prepared.clusters[0], prepared.jobs[0]
    tried = probes[0][0] if probes else "any value"
    if question == "num_gpus":
        tried = f"up to {probes[-1][0]}" if probes else tried
    parts = [f"no layout fits at {question}={tried} on {cluster.num_gpus} x {cluster.gpu.name}"]
    if job.precision in ("bf16", "fp8") and not cluster.gpu.bf16_supported:
        job = replace(job, precision="fp16")
        parts.append(
            f"{cluster.gpu.name} has no bf16: every layout breaks bf16_needs_gpu_support; "
            "with precision=fp16 (--precision fp16), as below"
        )
    relaxed = relaxed_constraints(cluster, prepared.constraints)
    floor = least_memory_layout(prepared.model, cluster, job, relaxed, prepared.threshold)
    if floor is not None:
        parts.append(_floor_words(floor, cluster))
    parts.append(MISSING_OFFLOAD)
    answer = fewest_gpus(
        prepared.model,
        replace(cluster, num_gpus=cluster.num_gpus * ALTERNATIVE_FACTOR),
        job,
        profile=profile,
        constraints=relaxed,
        threshold=prepared.threshold,
        top_k=1,
        budget=prepared.budget,
    )
    if answer.value is None:
        parts.append(f"nor does any layout fit on {cluster.num_gpus * ALTERNATIVE_FACTOR} GPUs")
        return ". ".join(parts), None
    fewest = replace(cluster, num_gpus=answer.value)
    best: InverseAnswer = answer
    if question == "seq_length":  # the longest sequence those GPUs reach
        best = longest_sequence(
            prepared.model, fewest, job, profile=profile, constraints=relaxed,
            threshold=prepared.threshold, granularity=job.seq_length, top_k=1,
            budget=prepared.budget,
        )  # fmt: skip
    found = best.plans[0]
    lay = found.layout
    parts.append(
        f"the fewest {cluster.gpu.name} on which a layout fits: {answer.value}, up to "
        f"seq_length={found.job.seq_length} (tp={lay.tp} pp={lay.pp} dp={lay.dp}, "
        f"precision={job.precision}; its launch flags are in 'alternative')"
    )
    return ". ".join(parts), best
