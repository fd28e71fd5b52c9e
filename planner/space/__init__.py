"""The layout space: enumeration, Megatron's rules, and the communication flags a layout gets."""

from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.memory_axes import MemoryChoices
from planner.space.rules import RULES, Rule, check_rules, violations

__all__ = [
    "RULES",
    "MemoryChoices",
    "Rule",
    "SearchConstraints",
    "check_rules",
    "enumerate_layouts",
    "violations",
]
