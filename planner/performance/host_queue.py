"""The launch queue between the host and the GPU, priced exactly at the granularity of a few
kernel groups per layer (mechanisms-facts §3.1, §3.3).

The host launches kernels 1..n in program order, ``h_i`` seconds each; the GPU runs them in the
same order, ``g_i`` seconds each, kernel i starting once it is launched and kernel i-1 is done.
For a queue that starts empty (the GPU idle, as after a device-to-host sync) kernel n ends at

    T = max over k of (h_1 + ... + h_k) + (g_k + ... + g_n)

(the two-machine flow shop; k is the last kernel at which the GPU waited for the host). The
familiar max(sum g, sum h) is its optimistic bound: it holds only when no prefix of the
sequence is host-heavier than the GPU work in front of it, so a stretch of many tiny kernels
(router, permutes, per-expert GEMMs with few rows) right after the sync shows even when the
GPU's total is larger.

Kernels come in groups (a layer's attention half, its router, its eager experts) whose host and
GPU seconds the caller knows as totals. Inside a group the kernels are taken as alike, so the
term is linear in k there and its maximum sits on a group boundary (up to one kernel of either
side): T = max over boundaries b of H(groups before b) + G(groups after b). A run of identical
layers is a block repeated ``count`` times; the term is linear in how many copies lie before the
boundary, so only the first and the last copy need evaluating. Every quantity is an array over
layouts: a handful of numpy operations per group, no loop over kernels or layouts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelGroup:
    """Consecutive kernels of one pass, launched one after another."""

    host_s: FloatArray | float
    """Host seconds to launch them (Python, dispatch, launch; or one graph launch)."""
    gpu_s: FloatArray | float
    """GPU seconds to run them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RepeatedGroups:
    """``count`` identical copies of a sequence of groups (one layer's, repeated per layer).
    A fractional count (layers averaged over a stage's dense and MoE kinds) scales one copy."""

    groups: tuple[KernelGroup, ...]
    count: FloatArray | float


Item = KernelGroup | RepeatedGroups


def _totals(item: Item) -> tuple[FloatArray, FloatArray]:
    if isinstance(item, KernelGroup):
        return np.asarray(item.host_s, np.float64), np.asarray(item.gpu_s, np.float64)
    h = sum((np.asarray(g.host_s, np.float64) for g in item.groups), np.float64(0.0))
    g = sum((np.asarray(g.gpu_s, np.float64) for g in item.groups), np.float64(0.0))
    n = np.maximum(np.asarray(item.count, np.float64), 0.0)
    return np.asarray(n * h, np.float64), np.asarray(n * g, np.float64)


def _empty(g: KernelGroup) -> bool:
    """A group that launches nothing and runs nothing (a scalar zero): skipped."""
    h, t = np.asarray(g.host_s), np.asarray(g.gpu_s)
    return h.ndim == 0 and t.ndim == 0 and float(h) == 0.0 and float(t) == 0.0


def _pruned(items: Sequence[Item]) -> list[Item]:
    out: list[Item] = []
    for item in items:
        if isinstance(item, KernelGroup):
            if not _empty(item):
                out.append(item)
            continue
        groups = tuple(g for g in item.groups if not _empty(g))
        if groups and np.any(np.asarray(item.count) > 0):
            out.append(RepeatedGroups(groups=groups, count=item.count))
    return out


def queue_time(items: Sequence[Item]) -> FloatArray:
    """Seconds from an empty queue to the end of the last kernel of ``items`` (module doc)."""
    items = _pruned(items)
    totals = [_totals(item) for item in items]
    gpu_total = sum((g for _, g in totals), np.float64(0.0))
    best = np.asarray(gpu_total, np.float64)  # the GPU never waits past the first launch
    host_before = np.zeros_like(best)
    gpu_before = np.zeros_like(best)
    for item, (h_item, g_item) in zip(items, totals, strict=True):
        gpu_after = gpu_total - gpu_before - g_item
        if isinstance(item, KernelGroup):
            best = np.maximum(best, host_before + h_item + gpu_after)
        else:
            best = np.maximum(best, _block_candidates(item, host_before, gpu_after))
        host_before = host_before + h_item
        gpu_before = gpu_before + g_item
    return np.asarray(best, np.float64)


def _block_candidates(
    block: RepeatedGroups, host_before: FloatArray, gpu_after: FloatArray
) -> FloatArray:
    """The largest boundary term inside a repeated block: for a boundary after group j of copy
    q+1, H = q copies + groups 1..j of the next, G = the rest of that copy + the copies after.
    Linear in q, so q = 0 or q = count - 1: the copies add (count - 1) x max(H_copy, G_copy)
    to the best boundary inside one copy."""
    n = np.maximum(np.asarray(block.count, np.float64), 0.0)
    one = np.minimum(n, 1.0)  # a fractional block is one scaled copy
    rest = np.maximum(n - 1.0, 0.0)
    hosts = [np.asarray(g.host_s, np.float64) for g in block.groups]
    gpus = [np.asarray(g.gpu_s, np.float64) for g in block.groups]
    h_copy = sum(hosts[1:], hosts[0])
    g_copy = sum(gpus[1:], gpus[0])
    # the best boundary inside one copy: H(groups <= j) + G(groups > j)
    h_in, g_out = hosts[0], g_copy - gpus[0]
    inner = h_in + g_out
    for h, g in zip(hosts[1:], gpus[1:], strict=True):
        h_in, g_out = h_in + h, g_out - g
        inner = np.maximum(inner, h_in + g_out)
    best = host_before + gpu_after + one * inner + rest * np.maximum(h_copy, g_copy)
    return np.asarray(np.where(n > 0, best, -np.inf), np.float64)
