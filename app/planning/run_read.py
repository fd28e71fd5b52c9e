"""What a plan runs on and with: the cluster description and the job's software stack, under the
request's field names (issue 12: a batch output row can be re-read as input and compared).

:class:`RunRead` is part of every ranked plan (``RankedPlan.run``), built from the planner's
resolved :class:`planner.ClusterSpec` and :class:`planner.TrainingJob` (a preset's NICs and
topology filled in, the stack's defaults resolved), so the plan says what it assumed, and the
batch rows (:mod:`app.batches.rows`) copy it into columns named as the input fields.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from app.planning.stack_fields import STACK_FIELDS
from planner import ClusterSpec, ModelSpec, TrainingJob
from planner.fp8_recipes import Fp8Recipe, effective_recipe
from planner.specs import IntraNodeTopology, Precision
from planner.stack_settings import AttentionBackend, CrossEntropyFusion, MoeGroupedGemmKernel

JOB_STACK = tuple(f.name for f in STACK_FIELDS if f.where == "job")
"""The job's stack fields (``tp_comm_overlap`` ...); the layout's are in ``LayoutRead``."""
CLUSTER_FIELDS = (
    "gpu",
    "num_gpus",
    "gpus_per_node",
    "nics_per_node",
    "nic_bandwidth_bytes_per_s",
    "inter_node_bandwidth_bytes_per_s",
    "intra_node_topology",
)
JOB_FIELDS = ("seq_length", "global_batch_size", "precision")
RUN_FIELDS = ("model", *CLUSTER_FIELDS, *JOB_FIELDS, *JOB_STACK)
"""Every field of :class:`RunRead`, in the batch output's column order."""


class RunRead(BaseModel):
    """The model, the cluster and the job a plan was computed for, as a request names them."""

    model_config = ConfigDict(extra="forbid")

    model: str
    gpu: str
    num_gpus: int
    gpus_per_node: int
    nics_per_node: int | None
    nic_bandwidth_bytes_per_s: float | None
    inter_node_bandwidth_bytes_per_s: float
    """Network per GPU, one direction (NICs x rate / GPUs per node where NICs are given)."""
    intra_node_topology: IntraNodeTopology
    seq_length: int
    global_batch_size: int
    precision: Precision
    tp_comm_overlap: bool
    attention_backend: AttentionBackend
    cross_entropy_fusion: CrossEntropyFusion
    moe_imbalance: float
    moe_grouped_gemm_kernel: MoeGroupedGemmKernel | None
    """The kernel the plan runs (the search's choice where the request left it open); None in
    an evaluation that left it open (priced as TE's default, multi_stream) and for dense models."""
    fp8_recipe: Fp8Recipe | None
    """The fp8 recipe the plan runs and is priced with (the job's, else the planner's choice for
    the GPU and release: planner.fp8_recipes); None for a job that does not train in fp8."""
    megatron_core_version: str | None
    """The Megatron-Core release the flags are for; None = the newest covered (0.19)."""
    te_version: str | None
    """The Transformer Engine release; None = the newest covered (2.18)."""
    expandable_segments: bool


def run_read(model: ModelSpec, cluster: ClusterSpec, job: TrainingJob) -> RunRead:
    """The run description of one plan from the planner's resolved specs."""
    values: dict[str, Any] = {
        "model": model.name,
        "gpu": cluster.gpu.name,
        **{k: getattr(cluster, k) for k in CLUSTER_FIELDS if k != "gpu"},
        **{k: getattr(job, k) for k in (*JOB_FIELDS, *JOB_STACK)},
        "fp8_recipe": effective_recipe(job, cluster.gpu),  # what the flags launch
    }
    return RunRead.model_validate(values)
