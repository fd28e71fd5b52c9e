"""The attention backend is spelled for the job's release (brief loose9 item 1).

``--attention-backend`` turns the choice into Transformer Engine's ``NVTE_FLASH_ATTN`` /
``NVTE_FUSED_ATTN`` variables (megatron-facts §1.10). It first ships in Megatron-Core 0.11
(``AttnBackend``; planner.megatron.version_flags says why, the sheets name no release): before,
a launch sets TE's variables itself, and an old log prints no ``attention_backend`` argument.
"""

from __future__ import annotations

import pytest

from planner.megatron.args import parse_megatron_args
from planner.megatron.flags import LaunchSpec, launch_spec
from planner.megatron.log_stack import stack_columns
from planner.megatron.log_version import infer_core_version
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B

CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=8, gpus_per_node=8)
LAYOUT = Layout(tp=2, dp=4)


def _launch(core: str, backend: str) -> LaunchSpec:
    job = TrainingJob(seq_length=4096, global_batch_size=64, megatron_core_version=core,
                      attention_backend=backend)  # type: ignore[arg-type]  # fmt: skip
    return launch_spec(LLAMA_8B, CLUSTER, job, LAYOUT)


@pytest.mark.parametrize(
    ("backend", "flash", "fused"),
    [("flash", "1", "0"), ("fused", "0", "1"), ("unfused", "0", "0")],
)
def test_before_core_0_11_the_backend_is_te_s_environment(
    backend: str, flash: str, fused: str
) -> None:
    spec = _launch("0.10", backend)
    assert "--attention-backend" not in spec.args and "--use-flash-attn" not in spec.args
    assert (spec.env["NVTE_FLASH_ATTN"], spec.env["NVTE_FUSED_ATTN"]) == (flash, fused)
    assert f"NVTE_FLASH_ATTN={flash}" in spec.command
    parsed = parse_megatron_args(spec.args, world_size=8, env=spec.env)
    assert parsed.stack_fields["attention_backend"] == backend


def test_auto_before_core_0_11_sets_nothing() -> None:
    spec = _launch("0.9", "auto")  # TE's default: flash and fused both allowed, TE picks
    assert "--attention-backend" not in spec.args
    assert not any(k in spec.env for k in ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN"))
    assert parse_megatron_args(spec.args, world_size=8).stack_fields["attention_backend"] == "auto"


@pytest.mark.parametrize("core", ["0.11", "0.19"])
def test_from_core_0_11_the_flag_and_no_variables(core: str) -> None:
    # the flag asserts if the variables were pre-set to something else (megatron-facts §1.10)
    spec = _launch(core, "fused")
    i = spec.args.index("--attention-backend")
    assert spec.args[i + 1] == "fused"
    assert not any(k in spec.env for k in ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN"))
    assert parse_megatron_args(spec.args, world_size=8).stack_fields["attention_backend"] == "fused"


def test_an_old_log_reads_auto_and_says_why() -> None:
    derived: list[str] = []
    cols = stack_columns({"tensor_model_parallel_size": "2", "use_flash_attn": "True"}, derived)
    assert cols["attention_backend"] == "auto"  # --use-flash-attn is inert (§1.10)
    assert any("predates --attention-backend" in d for d in derived)


def test_a_log_that_prints_the_backend_is_core_0_11_or_newer() -> None:
    found = infer_core_version({"tensor_model_parallel_size": "2",
                                "attention_backend": "AttnBackend.auto"})  # fmt: skip
    assert found is not None and found[0] == "0.11"
