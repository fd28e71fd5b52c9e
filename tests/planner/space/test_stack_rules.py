"""The GPU-dependent rules of the job's stack (planner.space.stack_rules)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner.space.rules import violations
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

B200 = replace(H100, name="b200-like", architecture="blackwell")
MOE_LAYOUT = Layout(tp=2, ep=8, dp=8, sequence_parallel=True)


def _messages(gpu_arch: str, precision: str, kernel: str, model=MIXTRAL_8X7B, layout=MOE_LAYOUT,  # type: ignore[no-untyped-def]
              recipe=None):  # fmt: skip
    gpu = B200 if gpu_arch == "blackwell" else H100
    job = TrainingJob(
        seq_length=4096, global_batch_size=64, precision=precision,  # type: ignore[arg-type]
        moe_grouped_gemm_kernel=kernel, fp8_recipe=recipe,  # type: ignore[arg-type]
    )  # fmt: skip
    found = violations(model, ClusterSpec(name="c16", gpu=gpu, num_gpus=16), job, layout)
    return [v for v in found if "moe_grouped_gemm_kernel" in v]


@pytest.mark.parametrize(
    ("arch", "precision", "kernel", "recipe", "refused"),
    [
        ("hopper", "fp8", "grouped", "delayed", True),  # no grouped kernel (§4.1)
        ("blackwell", "fp8", "grouped", "delayed", True),
        ("hopper", "fp8", "grouped", None, False),  # the default: tensorwise (current scaling)
        ("hopper", "fp8", "grouped", "blockwise", False),
        ("hopper", "fp8", "multi_stream", "delayed", False),
        ("hopper", "bf16", "grouped", None, False),
        ("blackwell", "fp8", "grouped", None, False),  # mxfp8: the cuBLASLt grouped path runs it
    ],
)
def test_grouped_kernel_needs_a_supported_fp8_recipe(
    arch: str, precision: str, kernel: str, recipe: str | None, refused: bool
) -> None:
    found = _messages(arch, precision, kernel, recipe=recipe)
    assert bool(found) is refused
    if refused:
        assert "use moe_grouped_gemm_kernel='multi_stream' or precision='bf16'" in found[0]


def test_dense_model_ignores_the_kernel() -> None:
    assert _messages("hopper", "fp8", "grouped", LLAMA_8B, Layout(tp=2, dp=8)) == []
