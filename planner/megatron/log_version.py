"""The Megatron-Core release of a log, inferred from its arguments block (issue 12 item 1: the
stack a run used is an input; a measurement row records it in ``megatron_core_version``).

Megatron prints every argument, defaults included, so an argument's presence says the release
has it. Its absence would say the release predates it, but uploaded logs are often trimmed to
the arguments that matter, so absence is not used. The fingerprints are those of
mechanisms-facts §8 (last paragraph), each a (first, last) release range:
``--cuda-graph-modules`` => core >= 0.18; ``--cuda-graph-impl`` => >= 0.15;
``--moe-flex-dispatcher-backend`` => >= 0.16; ``--moe-enable-deepep`` without it => 0.12-0.15;
``--cross-entropy-fusion-impl te`` accepted => <= 0.18; ``--fp8-recipe`` => >= 0.12;
``--cp-comm-type`` => >= 0.10. The row records the oldest release the fingerprints allow (the
first that has every argument the log shows: a lower bound), and says it was inferred and from
what.
"""

from __future__ import annotations

from planner.megatron.version_flags import ATTENTION_BACKEND_FLAG
from planner.stack_versions import CORE_VERSIONS, Version, format_version

__all__ = ["infer_core_version"]

_FIRST: dict[str, Version] = {
    "cuda_graph_modules": (0, 18),
    "cuda_graph_impl": (0, 15),
    "moe_flex_dispatcher_backend": (0, 16),
    "moe_enable_deepep": (0, 12),
    "fp8_recipe": (0, 12),
    "cross_entropy_fusion_impl": (0, 12),
    "cp_comm_type": (0, 10),
    "attention_backend": ATTENTION_BACKEND_FLAG,  # 0.11: version_flags says why (not in §8)
}
"""Argument -> the first core release that prints it (mechanisms-facts §8)."""
_LAST: dict[str, Version] = {"moe_enable_deepep": (0, 15)}
"""Arguments that a later release removed: present => at most this release."""
_OLDEST: Version = (0, 4)
_NEWEST: Version = (0, int(CORE_VERSIONS[-1].split(".")[1]))


def infer_core_version(a: dict[str, str]) -> tuple[str, str] | None:
    """(the oldest core release consistent with the arguments block ``a``, how it was inferred),
    or None where the block is empty, shows no fingerprint (nothing newer than core 0.4), or its
    fingerprints contradict each other."""
    if not a:
        return None
    lo, hi, why = _OLDEST, _NEWEST, []
    for name, first in _FIRST.items():
        if name in a:
            lo = max(lo, first)
            why.append(f"{name} => >= {format_version(first)}")
            if name in _LAST and "moe_flex_dispatcher_backend" not in a:
                hi = min(hi, _LAST[name])
                why.append(f"{name} without moe_flex_dispatcher_backend => <= 0.15")
    if a.get("cross_entropy_fusion_impl", "").strip().lower() == "te":
        hi = min(hi, (0, 18))  # core 0.19 rejects the te impl (mechanisms-facts §5.4, §8)
        why.append("cross_entropy_fusion_impl te => <= 0.18")
    if lo > hi or lo == _OLDEST:  # contradictory, or only "older than": no release to record
        return None
    span = format_version(lo) if lo == hi else f"{format_version(lo)}-{format_version(hi)}"
    return format_version(lo), f"core {span}, the oldest recorded ({'; '.join(why)})"
