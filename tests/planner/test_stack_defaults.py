"""The release rule of the stack defaults (planner.stack_defaults): table-driven, every floored
default has a fallback every covered release has, a stated value is never replaced."""

from __future__ import annotations

import dataclasses

import pytest

from planner import Layout, TrainingJob
from planner.specs import SpecError
from planner.stack_defaults import (
    RELEASE_FALLBACKS,
    floored_defaults,
    lowered_notes,
    release_defaults,
)
from planner.stack_versions import feature


def test_every_floored_default_has_a_fallback_every_release_has() -> None:
    assert floored_defaults() == {"tp_comm_overlap": True, "cross_entropy_fusion": "native"}
    assert set(RELEASE_FALLBACKS) == set(floored_defaults())
    assert all(feature(name, value) is None for name, value in RELEASE_FALLBACKS.items())


def test_layout_defaults_have_no_release_floor() -> None:
    # the layout's stack defaults are off (or None: the planner's choice, pinned per release)
    floored = [f.name for f in dataclasses.fields(Layout) if feature(f.name, f.default)]
    assert floored == []


@pytest.mark.parametrize(
    ("core", "fusion"), [("0.4", "unfused"), ("0.7", "unfused"), ("24.05", "unfused"),
                         ("0.8", "native"), (None, "native")],
)  # fmt: skip
def test_an_unstated_default_is_lowered_only_where_the_release_lacks_it(
    core: str | None, fusion: str
) -> None:
    stack = release_defaults({"megatron_core_version": core, "cross_entropy_fusion": None})
    assert stack["cross_entropy_fusion"] == fusion and stack["tp_comm_overlap"] is True
    job = TrainingJob(seq_length=2048, global_batch_size=8, **stack)
    assert bool(lowered_notes(job)) == (fusion == "unfused")


def test_a_stated_value_is_kept_and_refused_where_the_release_lacks_it() -> None:
    stack = release_defaults({"megatron_core_version": "0.7", "cross_entropy_fusion": "native"})
    assert stack["cross_entropy_fusion"] == "native"
    with pytest.raises(SpecError, match=r"needs Megatron-Core >= 0.8") as err:
        TrainingJob(seq_length=2048, global_batch_size=8, **stack)
    assert err.value.field == "cross_entropy_fusion"


# --- the library's own job type resolves unstated defaults like the API (brief loose9 item 3) ---


@pytest.mark.parametrize("core", ["0.4", "0.7", "24.05", "0.8", None])
def test_a_python_job_on_an_old_core_gets_the_release_default_not_a_refusal(
    core: str | None,
) -> None:
    # core 0.7 lacks --cross-entropy-loss-fusion (mechanisms-facts §8: 0.8): TrainingJob(...)
    # with the setting unstated refused it; it gets what the API's request path gives
    job = TrainingJob(seq_length=2048, global_batch_size=8, megatron_core_version=core)
    via_api = release_defaults({"megatron_core_version": core, "cross_entropy_fusion": None})
    assert job.cross_entropy_fusion == via_api["cross_entropy_fusion"]
    assert job.tp_comm_overlap is True  # every covered release has --tp-comm-overlap (0.4)
    assert bool(lowered_notes(job)) == (job.cross_entropy_fusion == "unfused")


def test_every_covered_release_builds_a_job_with_every_setting_unstated() -> None:
    from planner.stack_versions import CORE_VERSIONS, TE_VERSIONS

    for core in CORE_VERSIONS:
        for te in (TE_VERSIONS[0], None):
            for precision in ("bf16", "fp8"):
                job = TrainingJob(seq_length=2048, global_batch_size=8, precision=precision,
                                  megatron_core_version=core, te_version=te)  # fmt: skip
                assert job.cross_entropy_fusion in ("native", "unfused")


def test_the_recommended_default_is_what_the_forms_show() -> None:
    from planner.stack_defaults import job_defaults

    defaults = {f.name: f.default for f in dataclasses.fields(TrainingJob)}
    assert defaults["cross_entropy_fusion"] is None  # unstated: resolved per release
    assert job_defaults()["cross_entropy_fusion"] == "native"
    assert TrainingJob(seq_length=2048, global_batch_size=8).cross_entropy_fusion == "native"


def test_a_replaced_release_re_resolves_the_unstated_default() -> None:
    """``dataclasses.replace(job, megatron_core_version="0.7")`` kept the 'native' the first
    release filled in and was refused; it is now the job built anew with 0.7."""
    job = TrainingJob(seq_length=2048, global_batch_size=8)
    older = dataclasses.replace(job, megatron_core_version="0.7")
    assert older.cross_entropy_fusion == "unfused"
    assert older == TrainingJob(seq_length=2048, global_batch_size=8, megatron_core_version="0.7")
    newer = dataclasses.replace(older, megatron_core_version="0.12")
    assert newer.cross_entropy_fusion == "native"  # the newer release's default again


def test_a_replace_keeps_a_stated_setting_and_refuses_it_where_the_release_lacks_it() -> None:
    stated = TrainingJob(seq_length=2048, global_batch_size=8, cross_entropy_fusion="native")
    with pytest.raises(SpecError, match=r"needs Megatron-Core >= 0\.8.*'unfused'"):
        dataclasses.replace(stated, megatron_core_version="0.7")
    job = TrainingJob(seq_length=2048, global_batch_size=8)
    te = dataclasses.replace(job, cross_entropy_fusion="te", megatron_core_version="0.12")
    assert te.cross_entropy_fusion == "te"  # stated anew in the replace: kept
    assert dataclasses.replace(te, megatron_core_version="0.13").cross_entropy_fusion == "te"
