"""The profile's cluster level: one multiplier on the whole step time."""

from __future__ import annotations

import numpy as np
import pytest

from planner.layouts import LayoutBatch
from planner.performance.profile import PerformanceProfile
from planner.performance.step_time import default_profile, estimate_performance
from planner.specs import ClusterSpec, Layout, SpecError, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B

CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
JOB = TrainingJob(seq_length=4096, global_batch_size=256)
BATCH = LayoutBatch.from_layouts([Layout(tp=1, pp=1, dp=64), Layout(tp=2, pp=4, vpp=2, dp=8)])


def test_the_level_scales_the_step_and_every_part_of_it() -> None:
    prior = default_profile(H100)
    base = estimate_performance(LLAMA_8B, CLUSTER, JOB, BATCH, prior)
    slow = estimate_performance(
        LLAMA_8B, CLUSTER, JOB, BATCH, prior.with_coefficients(cluster_step_scale=1.1)
    )
    np.testing.assert_allclose(slow.step_time_s, 1.1 * base.step_time_s)
    np.testing.assert_allclose(slow.tokens_per_s_per_gpu, base.tokens_per_s_per_gpu / 1.1)
    np.testing.assert_allclose(sum(slow.breakdown.values()), slow.step_time_s)


def test_shipped_and_default_profiles_have_no_level() -> None:
    import models_db
    from models_db.profiles import available_profiles, load_profile

    assert default_profile(H100).cluster_step_scale == 1.0
    for slug in available_profiles():
        assert load_profile(models_db.load_gpu(slug)).cluster_step_scale == 1.0


def test_the_level_round_trips_and_must_be_positive() -> None:
    prior = default_profile(H100).with_coefficients(cluster_step_scale=1.07)
    again = PerformanceProfile.from_dict(prior.to_dict())
    assert again.cluster_step_scale == 1.07
    with pytest.raises(SpecError, match=r"cluster_step_scale=0\.0 must be > 0"):
        prior.with_coefficients(cluster_step_scale=0.0)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (-1.0, r"cluster_step_scale=-1\.0 must be > 0 and finite"),
        (float("inf"), r"cluster_step_scale=inf must be > 0 and finite"),
        ("abc", r"cluster_step_scale='abc' must be a number"),
        (None, r"cluster_step_scale=None must be a number"),
    ],
)
def test_a_bad_level_names_the_field_and_its_range(value: object, words: str) -> None:
    # a stored or uploaded profile (planner plan --profile FILE) may carry any JSON value
    data = {**default_profile(H100).to_dict(), "cluster_step_scale": value}
    with pytest.raises(SpecError, match=words) as err:
        PerformanceProfile.from_dict(data)
    assert err.value.field == "cluster_step_scale"
