"""The host term's wiring: which kernel counts each layout launches (mechanisms-facts §3.2-3.4)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from planner.performance import host_term
from planner.specs import Layout
from tests.planner.fixtures import MIXTRAL_8X7B
from tests.planner.performance.test_mechanism_wiring import ctx_for


def _kernels_seen(monkeypatch: pytest.MonkeyPatch, layouts: list[Layout]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    real = host_term.micro_batch_time

    def spy(**kw: Any) -> Any:
        seen.append(kw)
        return real(**kw)

    monkeypatch.setattr(host_term, "micro_batch_time", spy)
    ctx = ctx_for(MIXTRAL_8X7B, 4096, layouts)
    host_term.host_exposed_time(ctx, np.full(len(layouts), 50e-3))
    return seen


def test_deepep_layouts_launch_deepeps_fused_router(monkeypatch: pytest.MonkeyPatch) -> None:
    """§3.2: router + preprocess with DeepEP = 17 kernels, against 72 + 6 for alltoall."""
    seen = _kernels_seen(
        monkeypatch,
        [Layout(tp=1, ep=8, dp=8, moe_dispatcher="alltoall"),
         Layout(tp=1, ep=8, dp=8, moe_dispatcher="flex")],
    )  # fmt: skip
    routers = {kw["dispatcher"]: np.ravel(kw["moe_kernels"].router_fwd)[0] for kw in seen}
    assert routers == {"alltoall": 72 + 6, "flex_deepep": 17}


def test_moe_models_graph_attention_only_in_dense_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    """§3.4: MoE recipes capture attn moe_router moe_preprocess, so dense MLPs stay eager."""
    seen = _kernels_seen(monkeypatch, [Layout(tp=1, ep=8, dp=8, cuda_graphs="partial")])
    assert all(float(kw["dense_kernels"].eager_fwd[0]) > 0 for kw in seen)
