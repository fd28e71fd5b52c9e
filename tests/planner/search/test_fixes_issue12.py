"""Every rule of issue 12's stack settings has its own fix in the rejection histogram, not the
generic 'Loosen the setting this rule names.'"""

from __future__ import annotations

import pytest

from planner.search.fixes import fix_for
from planner.space.rules import RULES

GENERIC = "Loosen the setting this rule names."


@pytest.mark.parametrize(
    "rule_id",
    ["cp_a2a_heads_divisible", "cp_a2a_p2p_hierarchical", "moe_grouped_gemm_kernel_supported"],
)
def test_stack_rules_have_a_specific_fix(rule_id: str) -> None:
    (rule,) = [r for r in RULES if r.id == rule_id]
    assert fix_for(rule.summary, "memory") != GENERIC


def test_every_rule_has_a_specific_fix() -> None:
    missing = [r.id for r in RULES if fix_for(r.summary, "memory") == GENERIC]
    assert missing == []
