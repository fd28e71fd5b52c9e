"""What ``planner`` suggests for an option or a command it does not know.

click lists up to three options that difflib finds close, by letters alone: ``--seq`` got
``--ep, --etp, --seed`` (not ``--seq-length``) and ``--gpu-typ`` got ``--gpu, --pp, --tp``.
:func:`closest` prefers what a person meant: the Megatron-LM flag our option stands for, an
option the typed name begins (``--seq`` -> ``--seq-length``) or extends (``--tp-size`` ->
``--tp``), and only then the few best difflib matches.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

# Megatron-LM's flag -> the planner option that sets the same thing (planner/megatron/flags.py)
MEGATRON_NAMES = {
    "--tensor-model-parallel-size": "--tp",
    "--pipeline-model-parallel-size": "--pp",
    "--virtual-pipeline-model-parallel-size": "--vpp",
    "--context-parallel-size": "--cp",
    "--expert-model-parallel-size": "--ep",
    "--expert-tensor-parallel-size": "--etp",
    "--recompute-granularity": "--recompute",
    "--moe-token-dispatcher-type": "--moe-dispatcher",
    "--use-distributed-optimizer": "--optimizer-sharding",
    "--bf16": "--precision",
    "--fp16": "--precision",
}
MAX_SHOWN = 4
CLOSE = 0.6  # difflib's own cutoff, as click uses it
NEAR_BEST = 0.1  # a match this far below the best one is noise, not a second reading


def closest(typed: str, options: Iterable[str]) -> list[str]:
    """The options ``typed`` most likely meant, best first (empty when none is close)."""
    known = sorted(set(options))
    meant = MEGATRON_NAMES.get(typed)
    if meant is not None and meant in known:
        return [meant]
    by_prefix = [o for o in known if o.startswith(typed + "-") or typed.startswith(o + "-")]
    if by_prefix:
        return sorted(by_prefix, key=lambda o: (abs(len(o) - len(typed)), o))[:MAX_SHOWN]
    scored = [(difflib.SequenceMatcher(None, typed, o).ratio(), o) for o in known]
    close = sorted(((s, o) for s, o in scored if s >= CLOSE), key=lambda so: (-so[0], so[1]))
    if not close:
        return []
    best = close[0][0]
    return [o for s, o in close if s >= best - NEAR_BEST][:MAX_SHOWN]


def did_you_mean(names: list[str]) -> str:
    """``Did you mean --a?`` / ``Did you mean --a or --b?`` / ``--a, --b or --c``."""
    shown = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"Did you mean {shown}?"


def suggest_options(exc: Any) -> None:
    """Rewrite a click ``NoSuchOption`` in place: :func:`closest` instead of click's list."""
    command = getattr(exc.ctx, "command", None)
    if command is None:
        return
    options = [o for p in command.params for o in (*p.opts, *p.secondary_opts) if o[:2] == "--"]
    names = closest(exc.option_name, options)
    exc.possibilities = None  # click's own list: replaced by the sentence below, or dropped
    if names:
        exc.message = f"{exc.message}. {did_you_mean(names)}"
