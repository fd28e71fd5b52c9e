"""The five-run bench's split (bench/five_runs.py): the campaign never reaches the starting fit,
and the uploaded rows are never scored."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bench import five_runs
from planner.calibration.measurements import Measurement
from planner.calibration.suggest import suggest_runs
from planner.performance.profile import PerformanceProfile
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B

CAMPAIGN = f"user x {H100.name}"


def rows(source: str, n: int, sweeps: int = 2) -> list[Measurement]:
    cluster = ClusterSpec(name="c", gpu=H100, num_gpus=64)
    job = TrainingJob(seq_length=4096, global_batch_size=256)
    return [
        Measurement(
            row_id=f"{source}-{i}",
            source_id=source,
            sweep_id=f"{source}-sweep-{i % sweeps}",
            reliability="high",
            model=LLAMA_8B,
            cluster=cluster,
            job=job,
            layout=Layout(tp=2 ** (i % 4), pp=1, dp=64 // 2 ** (i % 4)),
            tokens_per_s_per_gpu=1000.0 + 10 * i,
            step_time_s=None,
            mfu=None,
        )
        for i in range(n)
    ]


DATA = rows("other", 6) + rows("user", 10)


def test_the_split_keeps_the_campaign_out_of_the_start_and_the_uploads_out_of_the_score() -> None:
    group = [m for m in DATA if five_runs.campaign_key(m) == CAMPAIGN]
    uploaded = five_runs.random_ids(group, seed=3)
    split = five_runs.make_split(DATA, CAMPAIGN, uploaded)
    assert len(uploaded) == five_runs.UPLOAD == len(set(uploaded))
    assert {m.source_id for m in split.start_rows} == {"other"}
    assert {m.row_id for m in split.uploaded} == set(uploaded)
    assert not {m.row_id for m in split.scored} & set(uploaded)
    assert len(split.scored) == len(group) - five_runs.UPLOAD


def test_uploading_a_row_of_another_campaign_is_refused() -> None:
    with pytest.raises(ValueError, match="not rows of campaign"):
        five_runs.make_split(DATA, CAMPAIGN, ["other-0"])


def test_campaign_result_fits_without_the_campaign_and_scores_only_other_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real orchestration with spies in place of the fits: every seed and the suggest
    variant upload 5 campaign rows and are scored on the campaign's other 5."""
    seen: dict[str, list[Any]] = {"start": [], "upload": [], "score": []}

    def start(gpu: Any, train: list[Measurement]) -> PerformanceProfile:
        seen["start"].append({m.row_id for m in train})
        return default_profile(gpu)

    def upload(
        up: list[Measurement], prior: PerformanceProfile, *, fit_level: bool = True
    ) -> tuple[Any, dict[str, Any]]:
        seen["upload"].append({m.row_id for m in up})
        seen.setdefault("level", []).append(fit_level)
        report = {
            "decision": {"kept_prior": False, "choice": "fit", "reason": "spy"},
            "moved": [],
            "level": {"cluster_step_scale": 1.0},
        }
        return prior, report

    def score(scored: list[Measurement], profile: PerformanceProfile) -> dict[str, Any]:
        seen["score"].append({m.row_id for m in scored})
        return {"median_ape": 0.0, "p90_ape": 0.0, "min_spearman": None, "sweeps": {}}

    def suggested(group: list[Measurement], prior: PerformanceProfile) -> tuple[list[str], dict]:
        return [m.row_id for m in group[-5:]], {}

    monkeypatch.setattr(five_runs, "starting_profile", start)
    monkeypatch.setattr(five_runs, "upload", upload)
    monkeypatch.setattr(five_runs, "score", score)
    monkeypatch.setattr(five_runs, "suggested_ids", suggested)
    monkeypatch.setattr(five_runs, "summarise", lambda runs: {"seeds": len(runs)})
    group = [m for m in DATA if five_runs.campaign_key(m) == CAMPAIGN]
    five_runs.campaign_result(DATA, CAMPAIGN, group)

    campaign_ids = {m.row_id for m in group}
    # the campaign-out start sees every other row; the GPU-out start fewer; none sees the campaign
    assert seen["start"][0] == {m.row_id for m in DATA} - campaign_ids
    assert all(not train & campaign_ids for train in seen["start"])
    # with the level: 2 starts x SEEDS and the suggest variant; without it: 2 starts x SEEDS
    assert len(seen["upload"]) == 4 * five_runs.SEEDS + 1
    assert seen["level"].count(False) == 2 * five_runs.SEEDS
    # score is called twice per upload (before and after), on the same held-out rows
    for i, up in enumerate(seen["upload"]):
        assert len(up) == five_runs.UPLOAD and up <= campaign_ids
        for scored in seen["score"][2 * i : 2 * i + 2]:
            assert scored == campaign_ids - up


def test_a_suggested_run_is_nearest_to_the_row_of_its_own_layout() -> None:
    group = rows("user", 8, sweeps=1)
    plan = next(m for m in group if m.layout.tp == 2)  # its variants tp 1 and 4 are rows too
    small = replace(plan.cluster, num_gpus=8)
    out = suggest_runs(
        plan.model,
        small,
        plan.job,
        replace(plan.layout, dp=8 // plan.layout.tp),
        default_profile(H100),
        k=1,
        noise=five_runs.level_noise_without(plan),
    )
    run = out.runs[0]
    nearest = min(group, key=lambda m: five_runs.distance(run, m))
    assert nearest.layout.tp == run.layout.tp
