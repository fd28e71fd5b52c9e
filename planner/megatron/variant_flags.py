"""Megatron flags of the attention and activation variants: sliding windows, attention sinks and
the MLP activation (catalog-facts §1.3, §1.6; megatron-facts §1 activation row).

:func:`variant_args` emits them from a :class:`ModelSpec`, :func:`add_variant_arguments` and
:func:`parsed_variant_fields` read them back for :func:`planner.megatron.args.parse_megatron_args`.
No sheet states a minimum Megatron-Core version for ``--window-size``, ``--softmax-type``,
``--quick-geglu``, ``--glu-linear-offset`` or ``--activation-func-clamp-value``, so none is
checked (planner.stack_versions).
"""

from __future__ import annotations

import argparse
from typing import Any

from planner.specs import SOFTMAX_TYPES, ModelSpec, SpecError

__all__ = ["add_variant_arguments", "parsed_variant_fields", "variant_args"]


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def variant_args(model: ModelSpec) -> list[str]:
    """Activation, window and softmax flags; Megatron's defaults (GeLU, full attention, vanilla
    softmax) emit nothing."""
    args: list[str] = []
    if model.swiglu:
        args.append("--swiglu")
    elif model.quick_geglu:
        args.append("--quick-geglu")
    elif model.squared_relu:
        args.append("--squared-relu")
    if model.glu_linear_offset != 0.0:
        args += ["--glu-linear-offset", _number(model.glu_linear_offset)]
    if model.activation_func_clamp_value is not None:
        args += ["--activation-func-clamp-value", _number(model.activation_func_clamp_value)]
    if model.window_size is not None:
        left, right = model.window_size
        args += ["--window-size", f"{left},{right}"]  # catalog-facts §1.6: "127,0"
        if model.window_attn_skip_freq is not None:
            args += ["--window-attn-skip-freq", str(model.window_attn_skip_freq)]
    if model.softmax_type != "vanilla":
        args += ["--softmax-type", model.softmax_type]
    return args


def _window(text: str) -> tuple[int, int]:
    parts = text.replace("(", "").replace(")", "").split(",")
    try:
        left, right = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--window-size {text!r} must be two integers 'left,right' (GPT-OSS: 127,0)"
        ) from None
    return left, right


def add_variant_arguments(p: argparse.ArgumentParser) -> None:
    """The flags :func:`variant_args` emits, with Megatron's defaults."""
    for flag in ("--swiglu", "--quick-geglu", "--squared-relu"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--glu-linear-offset", type=float, default=0.0)
    p.add_argument("--activation-func-clamp-value", type=float, default=None)
    p.add_argument("--window-size", type=_window, default=None)
    p.add_argument("--window-attn-skip-freq", type=int, default=None)
    p.add_argument("--softmax-type", choices=SOFTMAX_TYPES, default="vanilla")


def parsed_variant_fields(ns: argparse.Namespace) -> dict[str, Any]:
    """ModelSpec fields of the parsed flags (ModelSpec checks the values)."""
    window = ns.window_size
    if ns.window_attn_skip_freq is not None and window is None:
        raise SpecError(
            "--window-attn-skip-freq is set without --window-size; pass both (GPT-OSS: "
            "--window-size 127,0 --window-attn-skip-freq 2)",
            field="window_attn_skip_freq",
        )
    return {
        "swiglu": ns.swiglu,
        "quick_geglu": ns.quick_geglu,
        "squared_relu": ns.squared_relu,
        "glu_linear_offset": ns.glu_linear_offset,
        "activation_func_clamp_value": ns.activation_func_clamp_value,
        "window_size": window,
        "window_attn_skip_freq": ns.window_attn_skip_freq if window is not None else None,
        "softmax_type": ns.softmax_type,
    }
