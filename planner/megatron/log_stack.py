"""The software-stack columns of a measurement row, read from a Megatron log's arguments block.

The columns are named as the fields (planner.stack_settings, and the layout's ``cuda_graphs`` and
``grad_reduce_dtype``); :mod:`planner.calibration.measurements` reads them. An argument the log
does not print leaves its column empty (the field's default), except where the Megatron version
predates the feature: then the run cannot have used it, as for CP and EP (log sheet §2.3).
"""

from __future__ import annotations

from planner.megatron.log_version import infer_core_version
from planner.megatron.parsing import parse_bool

__all__ = ["stack_columns"]

_BACKENDS = {"flash": "flash", "fused": "fused", "unfused": "unfused", "local": "unfused",
             "auto": "auto"}  # fmt: skip
"""--attention-backend values (printed as ``AttnBackend.x``); 'local' is Megatron's own
non-TE attention, the unfused path."""


def _flag(a: dict[str, str], name: str) -> bool | None:
    value = a.get(name, "").strip()
    return None if value in ("", "None") else parse_bool(value)


def stack_columns(a: dict[str, str], derived: list[str]) -> dict[str, str]:
    """Stack columns from the arguments block ``a``; ``derived`` gets what was inferred."""
    if not a:
        return {}
    out: dict[str, str] = {}
    overlap = _flag(a, "tp_comm_overlap")
    if overlap is None and "tp_comm_overlap" not in a:
        overlap = False
        derived.append("tp_comm_overlap=no (no tp_comm_overlap argument: Megatron predates it)")
    if overlap is not None:
        out["tp_comm_overlap"] = "yes" if overlap else "no"
    backend = a.get("attention_backend", "").strip().rsplit(".", 1)[-1].lower()
    if backend in _BACKENDS:
        out["attention_backend"] = _BACKENDS[backend]
    elif "attention_backend" not in a:  # core < 0.11: TE's NVTE_* environment chose
        out["attention_backend"] = "auto"
        derived.append(
            "attention_backend=auto (no attention_backend argument: Megatron predates "
            "--attention-backend, core 0.11; TE chose by NVTE_FLASH_ATTN / NVTE_FUSED_ATTN, "
            "which a log does not print: set the column if the run set them)"
        )
    fusion = _flag(a, "cross_entropy_loss_fusion")
    if fusion is None and "cross_entropy_loss_fusion" not in a:
        fusion = False  # the flag arrived in core 0.8 (mechanisms-facts §8)
        derived.append("cross_entropy_fusion=unfused (no cross_entropy_loss_fusion argument)")
    if fusion is not None:
        impl = a.get("cross_entropy_fusion_impl", "").strip().lower()
        out["cross_entropy_fusion"] = ("te" if impl == "te" else "native") if fusion else "unfused"
    if _flag(a, "moe_router_force_load_balancing"):
        out["moe_imbalance"] = "1.0"
    if a.get("fp8", "None").strip() not in ("None", "False", ""):  # an fp8 run (log_rows)
        recipe = a.get("fp8_recipe", "").strip().rsplit(".", 1)[-1].lower()
        if not recipe:  # --fp8-recipe arrived in core 0.12: delayed scaling only before
            recipe = "delayed"
            derived.append("fp8_recipe=delayed (no fp8_recipe argument: Megatron predates it)")
        out["fp8_recipe"] = recipe
    scope = a.get("cuda_graph_scope", "").strip().lower()
    impl = a.get("cuda_graph_impl", "").strip().lower()
    graphs = _flag(a, "enable_cuda_graph") or _flag(a, "external_cuda_graph")
    if "full_iteration" in scope:
        out["cuda_graphs"] = "full_iteration"
    elif graphs or impl in ("local", "transformer_engine"):
        out["cuda_graphs"] = "partial"
    elif (
        graphs is False
        or impl == "none"
        or not any(k in a for k in ("enable_cuda_graph", "external_cuda_graph", "cuda_graph_impl"))
    ):
        out["cuda_graphs"] = "none"
    cp_types = a.get("cp_comm_type", "").strip().strip("[]").replace("'", "").replace('"', "")
    kinds = {t.strip() for t in cp_types.split(",") if t.strip()}
    if len(kinds) == 1:  # one type for every layer (a per-layer mix has no column value)
        out["cp_comm_type"] = kinds.pop()
    elif "cp_comm_type" not in a and "context_parallel_size" in a:
        out["cp_comm_type"] = "p2p"  # the argument arrived in core 0.10: CP ran the p2p ring
        derived.append("cp_comm_type=p2p (no cp_comm_type argument: Megatron predates it)")
    inferred = infer_core_version(a)  # the log prints no release: its arguments tell
    if inferred is not None:
        out["megatron_core_version"] = inferred[0]
        derived.append(f"megatron_core_version={inferred[0]} inferred: {inferred[1]}")
    bf16_grads = _flag(a, "grad_reduce_in_bf16")
    if bf16_grads is not None:
        out["grad_reduce_dtype"] = "bf16" if bf16_grads else "fp32"
    return out
