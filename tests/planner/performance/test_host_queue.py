"""The host/GPU launch queue at kernel-group granularity (mechanisms-facts §3.1, §3.3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.performance.host_queue import KernelGroup, RepeatedGroups, queue_time

A = np.asarray


def _simulate(kernels: list[tuple[float, float]]) -> float:
    """Kernel by kernel: the host launches in order, the GPU starts a kernel once it is launched
    and the previous one is done."""
    host = gpu = 0.0
    for h, g in kernels:
        host += h
        gpu = max(gpu, host) + g
    return gpu


# a group: (kernels, host seconds, gpu seconds); a layer: 1-3 groups
GROUP = st.tuples(
    st.integers(1, 12), st.floats(0.0, 50.0), st.sampled_from([0.1, 1.0, 10.0, 100.0])
)
ITEM = st.one_of(
    st.tuples(st.just(1), st.lists(GROUP, min_size=1, max_size=1)),
    st.tuples(st.integers(1, 5), st.lists(GROUP, min_size=1, max_size=3)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(ITEM, min_size=1, max_size=4))
def test_group_queue_matches_the_kernel_by_kernel_queue(items: list) -> None:  # type: ignore[type-arg]
    """Kernels alike inside a group: exact up to one kernel's host + GPU time."""
    built: list[KernelGroup | RepeatedGroups] = []
    kernels: list[tuple[float, float]] = []
    one_kernel = 0.0
    for count, groups in items:
        layer, seq = [], []
        for n, h, g_scale in groups:
            g = g_scale * n
            layer.append(KernelGroup(host_s=A([h]), gpu_s=A([g])))
            seq += [(h / n, g / n)] * n
            one_kernel = max(one_kernel, h / n + g / n)
        kernels += seq * count
        built.append(
            layer[0] if count == 1 and len(layer) == 1
            else RepeatedGroups(groups=tuple(layer), count=A([float(count)]))
        )  # fmt: skip
    exact = _simulate(kernels)
    assert abs(float(queue_time(built)[0]) - exact) <= one_kernel + 1e-9


def test_a_host_heavy_stretch_after_the_sync_shows_when_the_gpu_total_is_larger() -> None:
    """§3.1: 'binds when mean GPU kernel time < host time per kernel' holds stretch by stretch
    after a sync: 100 tiny kernels (1 ms of launches) then one 5 ms GEMM take 6 ms, not
    max(5, 1) ms; the same kernels in the other order hide the launches."""
    tiny = KernelGroup(host_s=A([1e-3]), gpu_s=A([0.2e-3]))
    gemm = KernelGroup(host_s=A([10e-6]), gpu_s=A([5e-3]))
    assert float(queue_time([tiny, gemm])[0]) > 5.99e-3
    assert float(queue_time([gemm, tiny])[0]) < 5.21e-3


def test_repeated_layers_bank_the_gpu_slack_of_earlier_copies() -> None:
    """A run of identical layers without a sync: only the first copy's ramp shows when each
    layer is GPU-heavy; when each is host-heavy, the host paces all of them."""
    layer = (KernelGroup(host_s=A([0.3]), gpu_s=A([0.0])), KernelGroup(host_s=0.0, gpu_s=1.0))
    gpu_heavy = RepeatedGroups(groups=layer, count=A([10.0]))
    assert float(queue_time([gpu_heavy])[0]) == pytest.approx(10.0 + 0.3)
    host_heavy = RepeatedGroups(
        groups=(KernelGroup(host_s=A([1.0]), gpu_s=A([0.0])), KernelGroup(host_s=0.0, gpu_s=0.5)),
        count=A([10.0]),
    )
    assert float(queue_time([host_heavy])[0]) == pytest.approx(10.0 + 0.5)
    empty = RepeatedGroups(groups=layer, count=A([0.0]))
    assert float(queue_time([empty, KernelGroup(host_s=A([2.0]), gpu_s=A([1.0]))])[0]) == 2.0
