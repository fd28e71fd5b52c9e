"""The Megatron-Core release of an uploaded log, inferred from the fingerprints of
mechanisms-facts §8 and recorded on the measurement row as inferred (megatron.log_version)."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.calibration.measurements import parse_rows
from planner.megatron.log import parse_megatron_log
from planner.megatron.log_stack import stack_columns
from planner.megatron.log_version import infer_core_version

LOGS = Path(__file__).parents[1] / "data" / "megatron_logs"


@pytest.mark.parametrize(
    ("arguments", "version", "span"),
    [({"cuda_graph_modules": "None", "cuda_graph_impl": "none"}, "0.18", "0.18-0.19"),
     ({"cuda_graph_impl": "none", "fp8_recipe": "delayed"}, "0.15", "0.15-0.19"),
     ({"moe_flex_dispatcher_backend": "deepep", "moe_enable_deepep": "False"}, "0.16", "0.16-0.19"),
     ({"moe_enable_deepep": "True", "cp_comm_type": "['p2p']"}, "0.12", "0.12-0.15"),
     ({"cross_entropy_fusion_impl": "te", "cuda_graph_impl": "none"}, "0.15", "0.15-0.18"),
     ({"cp_comm_type": "['p2p']"}, "0.10", "0.10-0.19")],
)  # fmt: skip
def test_fingerprints_give_the_oldest_release_that_prints_them(
    arguments: dict[str, str], version: str, span: str
) -> None:
    found = infer_core_version({"tensor_model_parallel_size": "2", **arguments})
    assert found is not None
    assert found[0] == version and f"core {span}" in found[1]


@pytest.mark.parametrize(
    "arguments",
    [{}, {"tensor_model_parallel_size": "8"},  # a 2021 log: no fingerprint at all
     {"cuda_graph_modules": "None", "cross_entropy_fusion_impl": "te"}],  # 0.18+ yet <= 0.18: ok
)  # fmt: skip
def test_no_fingerprint_records_nothing(arguments: dict[str, str]) -> None:
    found = infer_core_version(arguments)
    if "cuda_graph_modules" in arguments:
        assert found is not None and found[0] == "0.18"  # the one release both allow
    else:
        assert found is None


def test_contradicting_fingerprints_record_nothing() -> None:
    # DeepEP's old switch without the backend flag (<= 0.15) next to --cuda-graph-modules (>= 0.18)
    assert infer_core_version({"moe_enable_deepep": "True", "cuda_graph_modules": "None"}) is None


def test_the_row_records_the_release_and_says_it_was_inferred() -> None:
    derived: list[str] = []
    out = stack_columns({"cuda_graph_impl": "transformer_engine", "fp8_recipe": "delayed"}, derived)
    assert out["megatron_core_version"] == "0.15"
    assert any(d.startswith("megatron_core_version=0.15 inferred") for d in derived)
    result = parse_megatron_log((LOGS / "core_0_19_llama8b.log").read_text(), gpu_type="H100")
    row = result.to_measurement_rows()[0]
    assert row["megatron_core_version"] == "0.10"  # the fixture's block shows cp_comm_type only
    assert "megatron_core_version=0.10 inferred" in row["derived_fields"]
    old = parse_megatron_log((LOGS / "v2_6_gpt345m.log").read_text(), gpu_type="H100")
    assert old.to_measurement_rows()[0].get("megatron_core_version", "") == ""


def test_a_measurement_row_carries_the_release_to_its_job() -> None:
    from tests.planner.fixtures import H100
    from tests.planner.test_stack_settings import ROW

    (m,), _ = parse_rows([ROW | {"megatron_core_version": "0.12"}], lambda slug: H100)
    assert m.job.megatron_core_version == "0.12"
    _, skipped = parse_rows([ROW | {"megatron_core_version": "0.2"}], lambda slug: H100)
    assert "megatron_core_version" in skipped[0].reason
