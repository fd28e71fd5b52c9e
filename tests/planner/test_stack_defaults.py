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
