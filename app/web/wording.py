"""The web pages' words for what the API says in its own: one translation of a request error
(pydantic's "Input should be greater than or equal to 0.000000001" under a field's JSON name)
into the field's label and a readable bound, and the numbers of the calibration page.

The API keeps its wording (field paths, exact bounds: scripts read them); only pages use these.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

_BOUNDS = (  # pydantic-core's messages for Field(ge=, gt=, le=, lt=) and what a page says
    ("Input should be greater than or equal to ", "at least"),
    ("Input should be greater than ", "more than"),
    ("Input should be less than or equal to ", "at most"),
    ("Input should be less than ", "less than"),
)
_KINDS = {  # pydantic-core's type messages (prefixes) in plain words
    "Input should be a valid integer": "must be a whole number",
    "Input should be a valid number": "must be a number",
    "Input should be a finite number": "must be a finite number",
    "Input should be a valid boolean": "must be on or off",
    "Input should be a valid list": "must be a list of values",
    "Input should be a valid string": "must be text",
}
_API_HINTS = {  # where the API points a script, a page points at its own menu
    "GET /v1/clusters lists them": "the Cluster menu lists them",
    "GET /v1/models lists them": "the Model menu lists them",
    "GET /v1/gpus lists them": "the GPU type menu lists them",
}
TINY = 1e-6
"""A lower bound this small only says "positive" (the schema's 1e-9 keeps zero out)."""


def readable(value: float) -> str:
    """A bound as a person reads it: 1,024; 0.05; 10^15 (never 0.000000001 or 1e+15)."""
    if value == int(value) and abs(value) < 1e9:
        return f"{value:,.0f}"
    if value and abs(value) >= 1e9:
        mantissa, exponent = f"{value:.3g}".split("e+") if "e+" in f"{value:.3g}" else ("", "")
        if exponent:
            head = "" if mantissa == "1" else f"{mantissa} × "
            return f"{head}10^{int(exponent)}"
    return f"{value:g}"


def _bound_phrase(message: str) -> str | None:
    for prefix, words in _BOUNDS:
        if message.startswith(prefix):
            text = message.removeprefix(prefix).strip().rstrip(".")
            try:
                bound = float(text)
            except ValueError:
                return None
            if words in ("at least", "more than") and 0 < bound <= TINY:
                return "must be more than 0"
            return f"must be {words} {readable(bound)}"
    return None


def plain(message: str, field: str | None, labels: Mapping[str, str]) -> str:
    """A request error's message in the page's words: the field's label for its JSON name, a
    sentence for pydantic's phrases, readable bounds ("Network per GPU must be more than 0")."""
    parts = [p for p in (field or "").split(".") if p and not p.isdigit()]  # no list index
    name = parts[-1] if parts else ""
    label = labels.get(name) or name.replace("_", " ").capitalize()
    text = message
    if field and text.startswith(f"{field}: "):
        text = text.removeprefix(f"{field}: ")
    phrase = _bound_phrase(text)
    if phrase is None:
        phrase = next((words for raw, words in _KINDS.items() if text.startswith(raw)), None)
    if phrase is not None:
        return f"{label} {phrase}."
    for hint, words in _API_HINTS.items():
        text = text.replace(hint, words)
    for ident, words in labels.items():
        if "_" in ident:  # identifiers only: "model" and "gpu" are words in messages too
            text = re.sub(rf"\b{ident}(_options)?\b", words, text)
    return text


def coefficient(value: Any) -> str:
    """A fitted coefficient: 4 significant digits, and 0 for what is 0 up to rounding."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    number = float(value)
    if abs(number) < 1e-12:  # a least-squares zero (7.6e-16) is a zero
        return "0"
    if 1e-3 <= abs(number) < 1e6:
        digits = max(0, 3 - math.floor(math.log10(abs(number))))
        return f"{number:,.{digits}f}"
    return f"{number:.4g}"


def plural(count: Any, word: str, many: str | None = None) -> str:
    """ "1 measured run", "3 measured runs" (``many`` where adding "s" is wrong)."""
    n = int(count or 0)
    return f"{n:,} {word if n == 1 else many or word + 's'}"


FILTERS: dict[str, Callable[..., str]] = {"coefficient": coefficient, "plural": plural}
