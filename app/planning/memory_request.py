"""A plan request's memory settings and inverse questions, into the planner's (issue 13).

``to_memory_choices`` turns the request's memory fields into :class:`planner.MemoryChoices`;
``run_inverse`` answers ``maximize`` (``seq_length``, ``micro_batch_size``) and ``minimize``
(``num_gpus``) with :mod:`planner.search.inverse`, each plan stating the value reached
(``"seq_length": 5120``) and carrying its launch flags like any plan (a typed ``InverseResult``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.planning.schemas import PlanJobCreate
from planner import MemoryChoices, PerformanceProfile, SpecError

if TYPE_CHECKING:
    from app.planning.plan_request import PreparedPlan
    from app.planning.reports import InverseResult

Progress = Callable[[int, int], None]
INVERSE_SEQ_START = 128
"""Sequence length of the job a ``maximize=seq_length`` request resolves to before the search
(the search's granularity: every value it tries is a multiple of it)."""


def to_memory_choices(req: PlanJobCreate) -> MemoryChoices:
    """The request's memory settings; the planner's SpecError names the bad field."""

    def values(name: str) -> tuple[Any, ...] | None:
        given = getattr(req, name)
        return tuple(dict.fromkeys(given)) if given is not None else None

    fractions = values("optimizer_offload_fraction")
    return MemoryChoices(
        grad_reduce_dtype=values("grad_reduce_dtype"),
        optimizer_state_dtype=values("optimizer_state_dtype"),
        allow_numerics_changes=req.allow_numerics_changes,
        recompute_modules=values("recompute_modules"),
        search_recompute_modules=req.search_recompute_modules,
        recompute_num_layers=req.recompute_num_layers,
        cuda_graphs=None if req.cuda_graphs == "auto" else req.cuda_graphs,
        activation_offload_layers=req.activation_offload_layers,
        optimizer_offload_fraction=fractions if fractions is not None else (0.0,),
        fp8_param_gather=req.fp8_param_gather,
        pipeline_layout=req.pipeline_layout,
        auto_pipeline_layout=req.auto_pipeline_layout,
        activation_offload_modules=values("activation_offload_modules"),
        search_activation_offload=req.search_activation_offload,
    )


def check_inverse(req: PlanJobCreate) -> None:
    """An inverse question asks about one model, cluster and batch; SpecError otherwise."""
    if req.maximize is not None and req.minimize is not None:
        raise SpecError(
            f"ask one question: maximize={req.maximize} or minimize={req.minimize}, not both",
            field="minimize",
        )
    question = req.maximize or req.minimize
    if question is None:
        return
    field = "maximize" if req.maximize else "minimize"
    for many in ("num_gpus_options", "global_batch_size_options"):
        if getattr(req, many) is not None:
            raise SpecError(
                f"{field}={question} takes one {many.removesuffix('_options')}, not a list",
                field=many,
            )
    if req.maximize == "micro_batch_size" and req.micro_batch_size is not None:
        raise SpecError(
            "maximize=micro_batch_size searches micro_batch_size; leave it unset",
            field="micro_batch_size",
        )


def run_inverse(
    req: PlanJobCreate,
    prepared: PreparedPlan,
    *,
    profile: PerformanceProfile | None = None,
    progress: Progress | None = None,
) -> InverseResult:
    """The typed answer to the request's inverse question, each plan with its launch flags."""
    from app.planning.no_fit import explain_no_fit
    from app.planning.report_build import inverse_report
    from models_db.profiles import load_profile
    from planner.search.inverse import fewest_gpus, largest_micro_batch, longest_sequence

    p = prepared
    cluster, job = p.clusters[0], p.jobs[0]
    run_profile = profile if profile is not None else load_profile(cluster.gpu)
    common: dict[str, Any] = {
        "profile": run_profile,
        "constraints": p.constraints,
        "threshold": p.threshold,
        "top_k": p.top_k,
        "budget": p.budget,
    }
    if req.maximize == "seq_length":
        answer = longest_sequence(
            p.model, cluster, job, granularity=INVERSE_SEQ_START,
            max_seq_length=req.seq_length, **common,
        )  # fmt: skip
    elif req.maximize == "micro_batch_size":
        answer = largest_micro_batch(p.model, cluster, job, **common)
    else:
        answer = fewest_gpus(p.model, cluster, job, **common)
    if progress is not None:
        progress(len(answer.probes), len(answer.probes))
    reason, alternative = None, None
    if not answer.plans:  # why, and the fewest GPUs that fit instead (app.planning.no_fit)
        reason, alternative = explain_no_fit(answer.question, answer.probes, p, common["profile"])
    return inverse_report(
        answer, model=p.model, cluster=cluster, profile=common["profile"], nothing_fits=reason,
        alternative=alternative,
    )  # fmt: skip
