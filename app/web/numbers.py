"""The one reading of a number typed into a web form: plain ASCII decimal, nothing else.

Python's ``int`` and ``float`` take more than a person means by a number: '٣' (an Arabic-Indic
three) reads as 3, '1_000' as 1000, '²' passes ``str.isdigit``, and 'inf' / 'nan' are floats.
A form that shows '٣' back while planning with 3, or stores 1000 from '1_000', says one thing
and does another; so every numeric input of every page goes through :func:`read_whole` or
:func:`read_decimal`, which take ASCII digits only (a decimal may carry a sign, a point and an
ASCII exponent), and :func:`refusal` words the message that names the field and the accepted
form. The reading itself is planner's (:mod:`planner.plain_numbers`), shared with measurement
files and the number text of API bodies, so every door takes the same numbers.
"""

from __future__ import annotations

import re

from planner.plain_numbers import (
    DECIMAL,
    DECIMAL_FORM,
    WHOLE,
    WHOLE_FORM,
    read_decimal,
    read_whole,
    too_large,
)

__all__ = ["DECIMAL", "DECIMAL_FORM", "WHOLE", "WHOLE_FORM", "read_decimal", "read_whole"]


def refusal(label: str, text: str, *, whole: bool) -> str:
    """'Label must be a whole number (ASCII digits 0-9 only, such as 8); you typed '٣'.'"""
    if too_large(text):  # past the largest float
        return f"{label} must be a finite number; you typed {text.strip()!r}."
    kind = f"a whole number ({WHOLE_FORM})" if whole else f"a number ({DECIMAL_FORM})"
    return f"{label} must be {kind}; you typed {text.strip()!r}."


RANGE = re.compile(r"[0-9]+-[0-9]+")
"""A range of whole numbers in a text list ('64-512')."""


def misspelled(text: str) -> str | None:
    """The piece of a number cell ('8', '1,2,4', '64-512') spelled with digits that are not
    plain ASCII decimal ('1_000', '٣', '²'), which the request's lax parsing would read as
    another number than the one shown; None when every piece is plain (or a word such as
    'auto', which the request's own check names)."""
    for piece in text.replace(" ", "").split(","):
        has_digit = any(ch.isnumeric() for ch in piece)
        if has_digit and not (DECIMAL.fullmatch(piece) or RANGE.fullmatch(piece)):
            return piece
    return None
