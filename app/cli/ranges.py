"""Say what a range option such as ``--num-gpus 64-4096`` expands to.

``LOW-HIGH`` means LOW doubled until HIGH, plus HIGH itself (``app.planning.convert.int_list``):
64-4096 is seven GPU counts, not 4 033. The commands print the expansion, so nobody has to
guess.
"""

from __future__ import annotations

RANGE_RULE = "a range LOW-HIGH means LOW, 2*LOW, 4*LOW, ... up to HIGH, and HIGH itself"


def expansion(option: str, text: str | None) -> str | None:
    """``--num-gpus 64-512 means 64, 128, 256, 512``, or None when ``text`` is not a range."""
    if text is None or "-" not in text or "," in text:
        return None
    from app.planning.convert import int_list
    from planner.specs import SpecError

    try:
        values = int_list(text, option, maximum=1 << 24)
    except (SpecError, ValueError):
        return None  # the request's own validation names the field and the fix
    if not values:
        return None
    shown = ", ".join(str(v) for v in values)
    return f"--{option.replace('_', '-')} {text} means {shown} ({len(values)} values)"


def print_expansions(**options: str | None) -> None:
    """One stderr line per range among ``options`` (name=value)."""
    from app.cli.common import err_console

    for name, text in options.items():
        line = expansion(name, text)
        if line is not None:
            err_console.print(line, highlight=False, markup=False)
