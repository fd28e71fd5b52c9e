"""Fixed axes checked against the model when a request is made, not after a search.

A tp that divides none of the model's attention heads (Megatron's rule 17, megatron-facts §2.3)
rejects every layout: the search would succeed with 0 plans. The API, the CLI, batch rows (all
through :func:`app.planning.plan_request.to_plan`) and the web form (``form_checks``) use this
one check, so each says so up front with the values that work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner import ModelSpec, SpecError

MAX_TP = 1024
"""The API's bound on tp (``Axis`` in app/planning/schemas.py)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TpConflict:
    """Fixed tp values none of which splits the model's attention heads."""

    tp: tuple[int, ...]
    """The tp values the request fixes."""
    heads: int
    """The model's query heads (``--num-attention-heads``)."""
    valid: tuple[int, ...]
    """The tp values that divide ``heads`` (up to the API's bound)."""
    model: str

    def message(self) -> str:
        given = f"tp={self.tp[0]}" if len(self.tp) == 1 else f"none of tp={list(self.tp)}"
        verb = "does not divide" if len(self.tp) == 1 else "divides"
        valid = ", ".join(map(str, self.valid))
        return (
            f"{given} {verb} the {self.heads} attention heads of {self.model}; "
            f"valid tp: {valid} (or leave tp unset to search it)"
        )


def tp_conflict(model: ModelSpec, tp: int | Sequence[int] | None) -> TpConflict | None:
    """The conflict of a fixed tp (one value or a list) with ``model``, None if any value works."""
    if tp is None:
        return None
    values = tuple(sorted({int(t) for t in ([tp] if isinstance(tp, int) else tp)}))
    heads = model.num_attention_heads
    # megatron-facts §2.3 rule 17: num_attention_heads % tp == 0
    if not values or any(t >= 1 and heads % t == 0 for t in values):
        return None
    valid = tuple(d for d in range(1, min(heads, MAX_TP) + 1) if heads % d == 0)
    return TpConflict(tp=values, heads=heads, valid=valid, model=model.name)


def check_fixed_axes(model: ModelSpec, tp: int | Sequence[int] | None) -> None:
    """SpecError naming ``tp`` when no fixed tp can split the model's heads."""
    conflict = tp_conflict(model, tp)
    if conflict is not None:
        raise SpecError(conflict.message(), field="tp")
