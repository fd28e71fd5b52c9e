"""The columns of a measurements CSV: which the loader knows, which every row needs.

QA (fix8 item 3): a CSV whose header matched none of ``measured-throughput.csv``'s columns was
refused with the first row's first gap ("row 1: hidden_size is missing"), which names neither
the columns the file has nor the ones the calibration page asks for. :func:`column_problem`
compares a header with :data:`KNOWN_COLUMNS` and :data:`REQUIRED` and says both, in the page's
terms (the model, num_gpus, tp, pp, micro_batch_size, global_batch_size, seq_length and a
throughput).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from planner.calibration.measurements import LAYOUT_STACK_COLUMNS
from planner.megatron.log_records import MEASUREMENT_COLUMNS
from planner.stack_settings import STACK_FIELDS

__all__ = ["KNOWN_COLUMNS", "REQUIRED", "column_problem"]

KNOWN_COLUMNS: frozenset[str] = frozenset(
    (
        *MEASUREMENT_COLUMNS,
        *STACK_FIELDS,
        *LAYOUT_STACK_COLUMNS,
        "moe_a2a_overlap",
        "moe_dispatcher",
    )
)
"""measured-throughput.csv's header, the stack columns and the optional MoE switches (the
columns :mod:`planner.calibration.measurements` reads)."""
ARCHITECTURE = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "vocab_size")
"""The model's shape where ``model_name`` is not a catalog model (measurement_arch)."""
THROUGHPUT = ("tokens_per_sec_per_gpu", "step_time_s", "tflops_per_gpu", "mfu_pct", "hfu_pct")
REQUIRED: tuple[tuple[str, ...], ...] = (
    ("model_name", *ARCHITECTURE),
    ("num_gpus",),
    ("tp",),
    ("pp",),
    ("micro_batch_size",),
    ("global_batch_size",),
    ("seq_length",),
    THROUGHPUT,
    ("gpu_type",),
    ("gpus_per_node",),
)
"""What every row needs: one column of each group (the model: its catalog name, or its shape)."""
_SAID = {
    "model_name": "the model (model_name, or its shape: " + ", ".join(ARCHITECTURE) + ")",
    "tokens_per_sec_per_gpu": "tokens_per_sec_per_gpu (or step_time_s, tflops_per_gpu, mfu_pct)",
    "gpu_type": "gpu_type (or choose the GPU)",
    "gpus_per_node": "gpus_per_node (or give it with the GPU)",
}


def column_problem(
    header: Iterable[str], *, given: Collection[str] = (), named_in: str = "the header line"
) -> str | None:
    """What is wrong with a CSV header or a JSON row's keys, or None: the required columns it
    lacks (``given``: those the request supplies, e.g. ``gpu_type``), and the columns the
    planner does not know; ``named_in`` says where the columns are named (for the fix)."""
    names = {h.strip() for h in header if h and h.strip()}
    have = names | set(given)
    lacking = [group for group in REQUIRED if not have & set(group)]
    if not lacking:
        return None
    parts = ["lacks the required columns " + ", ".join(_SAID.get(g[0], g[0]) for g in lacking)]
    unknown = sorted(names - KNOWN_COLUMNS)
    if unknown:
        parts.append(
            "its columns " + ", ".join(unknown) + " are not columns of measured-throughput.csv"
        )
    return "; ".join(parts) + f" ({named_in} must use measured-throughput.csv's names)"
