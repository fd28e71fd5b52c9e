"""The one reading of a number written as text: plain ASCII decimal, nothing else.

Python's ``int`` and ``float`` take more than a person means by a number: '٣' (an
Arabic-Indic three) reads as 3, '1_000' as 1000, and 'inf' / 'nan' are floats. A measurement
file, a form or a JSON body that says '1_0' and is planned with 10 says one thing and does
another; so every number that enters as text (web forms, measurement CSV/JSON rows, numeric
strings in API bodies) is read here: ASCII digits only, a decimal with an optional sign, point
and ASCII exponent, and always finite.
"""

from __future__ import annotations

import math
import re

WHOLE = re.compile(r"[0-9]+")
"""A whole number: ASCII digits only (no sign, no '_' separator, no other script's digits)."""
SIGNED_WHOLE = re.compile(r"[+-]?[0-9]+")
"""A whole number that may carry a sign."""
DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A decimal: ASCII digits with an optional sign, point and exponent (50, 0.5, 50e9, 1.5E-3)."""
WHOLE_FORM = "ASCII digits 0-9 only, such as 8"
DECIMAL_FORM = "ASCII digits with an optional '.' and exponent, such as 50, 0.5 or 50e9"
IN_WHOLE_DIGITS = "in ASCII digits 0-9"
"""The accepted form of a whole number, after an example ('send one such as 8 ...')."""
IN_DECIMAL_DIGITS = "in ASCII digits with an optional sign, '.' and exponent"
"""The accepted form of a decimal, after an example ('send one such as 0.8 ...')."""


def read_whole(text: str) -> int | None:
    """The whole number ``text`` spells in ASCII digits; None for anything else."""
    text = text.strip()
    return int(text) if WHOLE.fullmatch(text) else None


def read_decimal(text: str) -> float | None:
    """The finite number ``text`` spells in ASCII decimal; None for anything else (also for
    '1e999', which would read as infinity)."""
    text = text.strip()
    if not DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def too_large(text: str) -> bool:
    """Whether ``text`` is plain decimal yet past the largest float ('1e309')."""
    return DECIMAL.fullmatch(text.strip()) is not None and read_decimal(text) is None
