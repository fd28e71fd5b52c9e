"""Megatron-Core and Transformer Engine versions of a job, and which stack settings they have.

Issue 12 item 1 ("the stack a run used is an input"): a launch command is only right for the
Megatron-LM and TE it runs on. A job names them in ``megatron_core_version`` and ``te_version``
("0.12", "2.5"; a NeMo container tag such as "24.09" stands for its pinned versions); unset means
the newest version the facts sheet covers (:data:`NEWEST_CORE`, :data:`NEWEST_TE`). Which release
first (or last) has each setting is data, one row per setting with its source, in
``planner/data/stack_features.csv`` (mechanisms-facts §8 "stack generations", §1.6, §4.1); this
module reads it and answers "does this stack have it" with the minimum version and the fix.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.specs import SpecError

if TYPE_CHECKING:
    from planner.specs import TrainingJob

__all__ = [
    "CORE_VERSIONS",
    "NEMO_CONTAINERS",
    "NEWEST_CORE",
    "NEWEST_TE",
    "TE_VERSIONS",
    "Feature",
    "Version",
    "core_version",
    "feature",
    "features",
    "format_version",
    "missing",
    "normalize_versions",
    "parse_version",
    "release_names",
    "require",
    "te_version",
]

Version = tuple[int, int]
CORE_VERSIONS: tuple[str, ...] = tuple(f"0.{m}" for m in range(4, 20))
"""Megatron-Core releases the facts sheet covers: core_v0.4.0 (2023-12) to core_v0.19.0
(2026-08) (mechanisms-facts §0, §8)."""
TE_VERSIONS: tuple[str, ...] = (
    *(f"1.{m}" for m in range(15)),
    *(f"2.{m}" for m in range(19)),
)
"""Transformer Engine releases: 1.0 to 1.14, then 2.0 to 2.18 (mechanisms-facts §0: tags v0.8
... v2.18; every feature of the table needs at least 1.0)."""
NEWEST_CORE, NEWEST_TE = CORE_VERSIONS[-1], TE_VERSIONS[-1]
NEMO_CONTAINERS: dict[str, tuple[str, str]] = {
    "24.05": ("0.7", "1.6"),
    "24.07": ("0.8", "1.8"),
    "24.09": ("0.9", "1.10"),
}
"""NeMo container tag -> (Megatron-Core, TE): mechanisms-facts §8 "Containers" (NVIDIA's
24.09 software component table); later containers have no published table there."""
_LABELS = {"megatron_core_version": "Megatron-Core", "te_version": "Transformer Engine"}
_KNOWN = {"megatron_core_version": CORE_VERSIONS, "te_version": TE_VERSIONS}
# "0.12", "0.12.1", "v0.12.0", "core_v0.12.0", "core_r0.13.0", "2.5.0.dev0", "0.11.0rc0"
_PATTERN = re.compile(r"^(?:core_[rv]|v)?(\d+)\.(\d+)(?:\.\d+)?(?:\.?(?:rc|dev|post)\d*)*$")


def format_version(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def parse_version(field: str, value: object) -> Version:
    """``value`` as (major, minor); SpecError naming ``field`` and the accepted range."""
    known = _KNOWN[field]
    accepted = f"{known[0]} to {known[-1]}"
    if field == "te_version":
        accepted = "1.0 to 1.14, 2.0 to 2.18"
    match = _PATTERN.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise SpecError(
            f"{field}={value!r} is not a version: write major.minor, e.g. "
            f"{known[-5]} ({_LABELS[field]} {accepted} are known)",
            field=field,
        )
    version = (int(match[1]), int(match[2]))
    if format_version(version) not in known:
        raise SpecError(
            f"{field}={value!r} is not a {_LABELS[field]} release the planner knows: use "
            f"{accepted} (mechanisms-facts §8), or leave it unset for the newest ({known[-1]})",
            field=field,
        )
    return version


def normalize_versions(job: TrainingJob) -> None:
    """Check the job's versions and store them as "major.minor"; a NeMo container tag in
    ``megatron_core_version`` sets both (the TE one unless given)."""
    core, te = release_names(job.megatron_core_version, job.te_version)
    object.__setattr__(job, "megatron_core_version", core)
    object.__setattr__(job, "te_version", te)


def release_names(core: object, te: object) -> tuple[str | None, str | None]:
    """(core, TE) as "major.minor" (None: unset), a NeMo container tag in ``core`` setting both
    (the TE one unless given); SpecError naming the field of a version the planner lacks."""
    if isinstance(core, str) and core.strip() in NEMO_CONTAINERS:
        core, container_te = NEMO_CONTAINERS[core.strip()]
        te = container_te if te is None else te
    if isinstance(te, str) and te.strip() in NEMO_CONTAINERS:
        te = NEMO_CONTAINERS[te.strip()][1]
    core_text = (
        None if core is None else format_version(parse_version("megatron_core_version", core))
    )
    te_text = None if te is None else format_version(parse_version("te_version", te))
    return core_text, te_text


def core_version(job: TrainingJob) -> Version:
    """The job's Megatron-Core (the newest covered where unset)."""
    return parse_version("megatron_core_version", job.megatron_core_version or NEWEST_CORE)


def te_version(job: TrainingJob) -> Version:
    """The job's Transformer Engine (the newest covered where unset)."""
    return parse_version("te_version", job.te_version or NEWEST_TE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Feature:
    """One row of ``stack_features.csv``: the releases that have a setting's value."""

    setting: str
    """The request field (or, for ``fp8_recipe`` and ``context_parallel``, what it implies)."""
    value: str
    """The field's value; 'on' = any value other than the field's default."""
    min_core: Version | None
    max_core: Version | None
    """The last core release that accepts it (None: every later one does)."""
    min_te: Version | None
    source: str

    def missing(self, core: Version, te: Version) -> str | None:
        """What the stack lacks, as a phrase ("core >= 0.10 and TE >= 1.11"), or None."""
        needs = []
        if (self.min_core and core < self.min_core) or (self.max_core and core > self.max_core):
            needs.append(self.core_range)
        if self.min_te and te < self.min_te:
            needs.append(f"Transformer Engine >= {format_version(self.min_te)}")
        return " and ".join(needs) or None

    @property
    def core_range(self) -> str:
        lo = f"Megatron-Core >= {format_version(self.min_core)}" if self.min_core else ""
        if self.max_core is None:
            return lo or "any Megatron-Core"
        hi = f"<= {format_version(self.max_core)}"
        return f"{lo}, {hi}" if lo else f"Megatron-Core {hi}"


def _version(text: str) -> Version | None:
    return None if not text.strip() else (int(text.split(".")[0]), int(text.split(".")[1]))


@cache
def features() -> tuple[Feature, ...]:
    """Every row of the availability table."""
    path = Path(__file__).with_name("data") / "stack_features.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return tuple(
            Feature(
                setting=r["setting"],
                value=r["value"],
                min_core=_version(r["min_core"]),
                max_core=_version(r["max_core"]),
                min_te=_version(r["min_te"]),
                source=r["source"],
            )
            for r in csv.DictReader(fh)
        )


def feature(setting: str, value: Any) -> Feature | None:
    """The table's row for ``setting=value`` (None: every covered release has it)."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    for f in features():
        if f.setting == setting and f.value == text:
            return f
    return None


def missing(job: TrainingJob, setting: str, value: Any) -> str | None:
    """What the job's stack lacks for ``setting=value`` (None when it has it)."""
    row = feature(setting, value)
    return None if row is None else row.missing(core_version(job), te_version(job))


def stack_name(job: TrainingJob) -> str:
    """The job's stack in words, saying where a version is the newest by default."""
    core = job.megatron_core_version or f"{NEWEST_CORE} (unset: the newest covered)"
    te = job.te_version or f"{NEWEST_TE} (unset: the newest covered)"
    return f"Megatron-Core {core}, Transformer Engine {te}"


def require(
    job: TrainingJob,
    setting: str,
    value: Any,
    *,
    fix: str,
    field: str | None = None,
    shown: Any = None,
) -> None:
    """SpecError naming ``field`` (default ``setting``) when the job's stack lacks the value:
    the minimum version, the job's stack and ``fix`` (what else to choose)."""
    row = feature(setting, value)
    lack = None if row is None else row.missing(core_version(job), te_version(job))
    if row is None or lack is None:
        return
    given = value if shown is None else shown
    text = str(given).lower() if isinstance(given, bool) else repr(given)
    raise SpecError(
        f"{field or setting}={text} needs {lack} ({row.source}); the job's stack is "
        f"{stack_name(job)}: {fix}",
        field=field or setting,
    )
