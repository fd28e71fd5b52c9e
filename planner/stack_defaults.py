"""Stack defaults a job's release has: the recommended value, or one every release has.

The job's recommended stack settings (``cross_entropy_fusion='native'``, ...) are the newest
release's; a job on an older Megatron-Core / Transformer Engine that leaves a setting unstated
must not be refused for a default it never chose (QA: core 0.4-0.7 and NeMo "24.05" were refused
because ``--cross-entropy-loss-fusion`` needs core 0.8). The rule is table-driven: every
``TrainingJob`` default with a row in ``planner/data/stack_features.csv`` that the job's release
lacks is lowered to :data:`RELEASE_FALLBACKS`' value for it, which every covered release has.
A setting the user states is kept, and refused as before where the release lacks it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from planner.specs import TrainingJob
from planner.stack_versions import (
    NEWEST_CORE,
    NEWEST_TE,
    feature,
    parse_version,
    release_names,
    stack_name,
)

__all__ = [
    "RECOMMENDED",
    "RELEASE_FALLBACKS",
    "fill_release_defaults",
    "floored_defaults",
    "job_defaults",
    "lowered_notes",
    "release_defaults",
]

RELEASE_FALLBACKS: Mapping[str, Any] = {
    "cross_entropy_fusion": "unfused",  # no --cross-entropy-loss-fusion: every release's loss
    "tp_comm_overlap": False,  # no --tp-comm-overlap (the TP collectives exposed)
}
"""Per job setting whose default has a release floor: the value every covered release has
(tests check each has no row in the table, and that every floored default has one)."""
RECOMMENDED: Mapping[str, Any] = {"cross_entropy_fusion": "native"}
"""The planner's recommended value of each TrainingJob field whose dataclass default is None
(unstated: resolved per release when the job is built, :func:`fill_release_defaults`)."""
_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(TrainingJob) if f.name != "release_filled"
} | dict(RECOMMENDED)


def job_defaults() -> dict[str, Any]:
    """Every TrainingJob field's recommended default (the newest release's), for the forms and
    the API's descriptions: the dataclass defaults with :data:`RECOMMENDED` for the unstated."""
    return dict(_DEFAULTS)


def floored_defaults() -> dict[str, Any]:
    """The TrainingJob defaults that some covered release lacks (a row of the table)."""
    return {name: value for name, value in _DEFAULTS.items() if feature(name, value) is not None}


def _lowered(core: str | None, te: str | None) -> dict[str, tuple[Any, str]]:
    """Setting -> (the fallback, what the default needs) where the release lacks the default."""
    version = (
        parse_version("megatron_core_version", core or NEWEST_CORE),
        parse_version("te_version", te or NEWEST_TE),
    )
    out: dict[str, tuple[Any, str]] = {}
    for name, default in floored_defaults().items():
        row = feature(name, default)
        lack = None if row is None else row.missing(*version)
        if row is not None and lack is not None:
            out[name] = (RELEASE_FALLBACKS[name], f"{lack} ({row.source})")
    return out


def release_defaults(stack: Mapping[str, Any]) -> dict[str, Any]:
    """``stack`` (TrainingJob keyword arguments; None or absent = not stated) with each unstated
    setting at its default, or at the fallback where the job's release lacks the default."""
    core, te = release_names(stack.get("megatron_core_version"), stack.get("te_version"))
    lowered = _lowered(core, te)
    out = dict(stack)
    for name in floored_defaults():
        if out.get(name) is None:
            out[name] = lowered[name][0] if name in lowered else _DEFAULTS[name]
    return out


def fill_release_defaults(job: TrainingJob) -> None:
    """Set the job's unstated (None) floored settings to what its release has, as the API's
    :func:`release_defaults` does for a request: ``TrainingJob(megatron_core_version="0.7")``
    gets cross_entropy_fusion='unfused', not a refusal of a default it never chose. Called from
    ``TrainingJob.__post_init__`` (the job is frozen: the checks run on the filled values).

    A setting filled when the job it was replaced from was built (``job.release_filled``, still
    at the filled value) counts as unstated too: ``dataclasses.replace(job,
    megatron_core_version="0.7")`` is then the job built anew with 0.7, not a refusal of the
    'native' its first release got. Which values were filled is recorded on the job."""
    names = [
        n
        for n in floored_defaults()
        if getattr(job, n) is None or (n, getattr(job, n)) in job.release_filled
    ]
    stated = {n: getattr(job, n) for n in ("megatron_core_version", "te_version")}
    filled = release_defaults({**stated, **dict.fromkeys(names)}) if names else {}
    for name in names:
        object.__setattr__(job, name, filled[name])
    object.__setattr__(job, "release_filled", frozenset((n, filled[n]) for n in names))


def lowered_notes(job: TrainingJob) -> list[str]:
    """For the plan's notes: the settings at their fallback because the release lacks the
    default (whether stated or lowered, the flags then leave the default's flag out)."""
    lowered = _lowered(job.megatron_core_version, job.te_version)
    return [
        f"{name}={_text(fallback)}, not the default {_text(_DEFAULTS[name])}: the default needs "
        f"{needs} and the job's stack is {stack_name(job)}"
        for name, (fallback, needs) in lowered.items()
        if getattr(job, name) == fallback
    ]


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)
