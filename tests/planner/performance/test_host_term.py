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


def _exposed_with_replay(layout: Layout, gpu_mb: float, recompute_mb: float) -> float:
    from planner.performance.compute import compute_time

    ctx = ctx_for(MIXTRAL_8X7B, 4096, [layout])
    parts = compute_time(ctx).replay
    gpu = np.array([gpu_mb])
    out = host_term.host_exposed_time(ctx, gpu, replay=(parts, np.array([recompute_mb])))
    return float(out[0])


def test_a_replayed_dispatch_syncs_and_relaunches_in_the_backward() -> None:
    """Recompute of the MoE block replays router, dispatch, experts and combine (§6.4): the
    backward launches them again and the dispatch syncs again (§3.3). GPU-bound, only the
    extra syncs show; host-bound, the replayed launches too."""
    plain = Layout(tp=1, ep=8, dp=8)
    moe = Layout(tp=1, ep=8, dp=8, recompute="selective", recompute_modules=("moe",))
    layers = 32  # Mixtral on one stage: every layer a MoE layer, one alltoall sync each
    sync = ctx_for(MIXTRAL_8X7B, 4096, [plain]).profile.host_sync_s
    slow, fast = 2.0, 32 * 100e-6
    gpu_bound = _exposed_with_replay(moe, slow, 0.1) - _exposed_with_replay(plain, slow, 0.0)
    assert gpu_bound == pytest.approx(layers * sync, rel=1e-6)
    host_bound = _exposed_with_replay(moe, fast, 1e-3) - _exposed_with_replay(plain, fast, 0.0)
    assert host_bound > layers * (sync + 50 * 10e-6)  # + the replayed launches of each layer
