"""Values of the Megatron-LM flags :func:`planner.megatron.parse_megatron_args` reads, read
strictly: a malformed or out-of-range value is a :class:`SpecError` naming the flag.

argparse's ``type=int`` / ``type=float`` read more than Megatron's launch scripts mean ('1_0'
is 10, '٤' is 4, 'nan' a float) and, on a value they refuse, print the whole usage and exit
the process: a library must neither guess nor exit. Numbers here follow the one number rule
(planner/plain_numbers.py); ranges are what Megatron or PyTorch would accept (a dropout is a
probability, torch.nn.Dropout; sizes and layer counts are positive, megatron-facts §2).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from typing import NoReturn

from planner.plain_numbers import (
    IN_DECIMAL_DIGITS,
    IN_WHOLE_DIGITS,
    SIGNED_WHOLE,
    read_decimal,
)
from planner.specs import SpecError


def flag_field(flag: str) -> str:
    """``--hidden-dropout`` -> ``hidden_dropout`` (the field a SpecError names)."""
    return flag.lstrip("-").replace("-", "_")


class _Refused(Exception):
    """Carries a SpecError out of argparse, which turns a ValueError into its own message."""

    def __init__(self, error: SpecError) -> None:
        super().__init__(error.message)
        self.error = error


def _refuse(flag: str, message: str) -> NoReturn:
    raise _Refused(SpecError(f"{flag} {message}", field=flag_field(flag)))


def whole(flag: str, *, low: int | None = None) -> Callable[[str], int]:
    """A whole number (>= ``low``) in ASCII digits (Megatron's sizes and counts)."""

    def read(text: str) -> int:
        if not SIGNED_WHOLE.fullmatch(text.strip()):
            _refuse(flag, f"{text!r} is not a whole number: write it {IN_WHOLE_DIGITS}, such as 8")
        value = int(text)
        if low is not None and value < low:
            _refuse(flag, f"{value} must be >= {low}")
        return value

    return read


def decimal(flag: str, *, low: float | None = None, high: float | None = None,
            low_open: bool = False) -> Callable[[str], float]:  # fmt: skip
    """A finite decimal in [low, high] ((low, high] with ``low_open``)."""

    def read(text: str) -> float:
        value = read_decimal(text)
        if value is None:
            _refuse(flag, f"{text!r} is not a number: write it {IN_DECIMAL_DIGITS}, such as 0.1")
        below = low is not None and (value <= low if low_open else value < low)
        if below or (high is not None and value > high):
            _refuse(flag, f"{value:g} must be {_range_text(low, high, low_open)}")
        return value

    return read


def _range_text(low: float | None, high: float | None, low_open: bool) -> str:
    if high is None:
        return f"{'>' if low_open else '>='} {low:g}"
    if low is None:
        return f"<= {high:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}]"


_ARGUMENT = re.compile(r"argument (--[\w-]+)")


class FlagParser(argparse.ArgumentParser):
    """An ArgumentParser that raises SpecError (naming the flag) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        named = _ARGUMENT.search(message)
        field = flag_field(named.group(1)) if named else None
        raise SpecError(f"Megatron flags: {message}", field=field)

    def parse_flags(self, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
        """``parse_known_args`` whose value errors come out as the SpecError they carry."""
        try:
            return self.parse_known_args(list(argv))
        except _Refused as refused:
            raise refused.error from None


def refuse(flag: str, message: str) -> NoReturn:
    """A SpecError for ``flag`` (for checks after parsing: ``--moe-layer-freq``, VPP)."""
    raise SpecError(f"{flag} {message}", field=flag_field(flag))


# the lowest whole value each integer flag takes; an integer flag not listed takes any integer
NON_NEGATIVE = ("--mtp-num-layers", "--cpu-offloading-num-layers")  # 0: none
POSITIVE = (
    # parallel sizes, batch and model dimensions (megatron-facts §1, §2.1: products and divisors)
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size",
    "--hierarchical-context-parallel-sizes", "--num-virtual-stages-per-pipeline-rank",
    "--num-layers-per-virtual-pipeline-stage", "--micro-batch-size", "--global-batch-size",
    "--seq-length", "--max-position-embeddings", "--num-layers", "--hidden-size",
    "--ffn-hidden-size", "--num-attention-heads", "--num-query-groups", "--kv-channels",
    "--vocab-size", "--make-vocab-size-divisible-by", "--num-experts", "--moe-router-topk",
    "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size", "--q-lora-rank",
    "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim",
    "--recompute-num-layers",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",  # rule 12: > 0
)  # fmt: skip
WHOLE_LOW: dict[str, int] = {**dict.fromkeys(NON_NEGATIVE, 0), **dict.fromkeys(POSITIVE, 1)}
# each float flag's range: (low, high, low_open); a float flag not listed takes any finite value
DECIMAL_RANGE: dict[str, tuple[float | None, float | None, bool]] = {
    "--hidden-dropout": (0.0, 1.0, False),  # a probability (torch.nn.Dropout refuses others)
    "--attention-dropout": (0.0, 1.0, False),
    "--optimizer-offload-fraction": (0.0, 1.0, False),  # a share of the optimizer state
    "--rotary-percent": (0.0, 1.0, True),  # a share of the head dimension (planner/model_checks.py)
    "--rotary-base": (0.0, None, True),  # RoPE theta
    "--rope-scaling-factor": (0.0, None, True),
    "--rotary-scaling-factor": (0.0, None, True),
    "--mscale": (0.0, None, True),
    "--mscale-all-dim": (0.0, None, False),
}


def strict_numbers(parser: argparse.ArgumentParser) -> None:
    """Give every int and float flag of ``parser`` its strict reader (in place)."""
    for action in parser._actions:  # argparse keeps no public list of its arguments
        flag = next((o for o in action.option_strings if o.startswith("--")), None)
        if flag is None:
            continue
        if action.type is int:
            action.type = whole(flag, low=WHOLE_LOW.get(flag))
        elif action.type is float:
            low, high, low_open = DECIMAL_RANGE.get(flag, (None, None, False))
            action.type = decimal(flag, low=low, high=high, low_open=low_open)
