"""The published check measures the band a user sees (brief bandpub9): for the planner's chosen
layout of a case, ``POST /v1/evaluations`` returns the same band, regime, fallback and
extrapolation warnings as bench/published_bands.py records."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.planning.schemas import EvaluationRequest
from bench.published_bands import case_band
from bench.published_cases import Case, dsv3_gb200_cases
from bench.published_check import _best, run_case
from bench.published_moe_h100 import moe_h100_cases
from models_db.profiles import load_profile
from planner.specs import Layout, TrainingJob


def _case(case_id: str) -> Case:
    cases = moe_h100_cases() + dsv3_gb200_cases()
    return next(c for c in cases if c.case_id == case_id)


def _request(case: Case, job: TrainingJob, layout: Layout) -> dict[str, Any]:
    """What a user sends to ``POST /v1/evaluations`` for the case's chosen layout."""
    model = {k: v for k, v in asdict(case.model).items() if k != "sources"}
    fields = EvaluationRequest.model_fields
    values = {**asdict(job), **layout.to_dict()}
    stated = {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in values.items()
        if k in fields and v is not None
    }
    return stated | {
        "model": model,
        "gpu": case.cluster.gpu.name,
        "num_gpus": case.cluster.num_gpus,
        "gpus_per_node": case.cluster.gpus_per_node,
    }


@pytest.mark.parametrize(
    "case_id",
    ["qwen3-30b-a3b-h100-tp2pp2ep4-graphs", "deepseek-v3-gb200-mlm-dsv3"],
)
def test_the_bench_band_is_the_one_the_api_returns(real_client: TestClient, case_id: str) -> None:
    """A fitted GPU whose MoE regime falls back to 'all', and a transferred GB200 profile."""
    case = _case(case_id)
    out = run_case(case)
    profile = load_profile(case.cluster.gpu)
    job = replace(case.job, moe_imbalance=1.0, moe_grouped_gemm_kernel="multi_stream")  # run_case's
    found = _best(case, job, profile, 1.0)
    assert out["band"] == case_band(found, profile, case.metric, case.published)
    response = real_client.post("/v1/evaluations", json=_request(case, job, found.layout))
    assert response.status_code == 200, response.text
    perf = response.json()["performance"]
    low, high = (v / perf["tokens_per_s_per_gpu"] for v in perf["tokens_per_s_per_gpu_interval"])
    assert out["band"]["ratio_band"] == pytest.approx([low, high], rel=1e-9)
    assert out["band"]["regime"] == perf["interval"]["regime"]
    assert out["band"]["layout_regime"] == perf["interval"]["layout_regime"]
    assert out["band"]["fallback"] == perf["interval"].get("fallback")
    assert out["band"]["extrapolation"] == perf["extrapolation"]
    assert perf["tokens_per_s_per_gpu"] == pytest.approx(found.performance["tokens_per_s_per_gpu"])
