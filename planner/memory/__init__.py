"""Per-GPU memory estimate: weights, gradients, optimizer states, activations, buffers, per
pipeline rank, and the 80 % rule."""

from planner.memory.estimate import TERM_NAMES, MemoryEstimate, estimate_memory
from planner.memory.options import GIB, MemoryOptions

__all__ = [
    "GIB",
    "TERM_NAMES",
    "MemoryEstimate",
    "MemoryOptions",
    "estimate_memory",
]
