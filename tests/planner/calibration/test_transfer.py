"""Transfer of fitted coefficients to unmeasured GPU types (planner.calibration.transfer)."""

from __future__ import annotations

from dataclasses import replace

from planner.calibration.transfer import model_family, transfer_profile, transferable
from planner.performance.step_time import default_profile
from tests.planner.fixtures import H100

H200 = replace(H100, name="h200-sxm-141gb", hbm_bandwidth_bytes_per_s=4.8e12)
B200 = replace(H100, name="b200-sxm-180gb", architecture="blackwell", peak_bf16_flop_per_s=2250e12)
MI300X = replace(
    H100, name="mi300x-192gb", architecture="cdna3", vendor="amd", peak_bf16_flop_per_s=1307e12
)
FITTED = default_profile(H100).with_coefficients(
    gemm_efficiency=0.61, tp_overlap=0.9, dp_overlap=0.95, layer_overhead_s=33e-6
)


def test_same_die_takes_the_chip_efficiencies() -> None:
    prof = transfer_profile(FITTED, H100, H200)
    assert prof.gemm_efficiency == 0.61
    assert prof.gpu == "h200-sxm-141gb"


def test_other_architecture_keeps_its_own_chip_priors_but_takes_software() -> None:
    prof = transfer_profile(FITTED, H100, B200)
    assert prof.gemm_efficiency == default_profile(B200).gemm_efficiency != 0.61
    assert prof.layer_overhead_s == 33e-6
    assert prof.tp_overlap == 0.9


def test_tp_comm_overlap_does_not_cross_vendors() -> None:
    assert "tp_overlap" not in transferable(H100, MI300X)
    assert transfer_profile(FITTED, H100, MI300X).tp_overlap == default_profile(MI300X).tp_overlap
    assert "dp_overlap" in transferable(H100, MI300X)


def test_provenance_names_the_source() -> None:
    prof = transfer_profile(FITTED, H100, B200)
    assert prof.provenance["transferred_from"] == "h100-sxm-80gb"
    assert prof.provenance["kind"] == "priors+transfer"


def test_model_families_of_measured_names() -> None:
    assert model_family("Llama 3.1 405b (proxy)") == "llama"
    assert model_family("LLAMA2-70B SFT") == "llama"
    assert model_family("NeMo Megatron GPT3 175b") == "gpt"
    assert model_family("MT-NLG 530B arch") == "gpt"
    assert model_family("Nemotron4 15b") == "nemotron"
    assert model_family("Grok 1 314b") == "grok-moe"


def test_coefficients_the_source_rows_did_not_identify_keep_the_target_prior() -> None:
    # an A100 fit whose rows never saw TP overlap must not hand its 0.0 prior to a Hopper GPU
    a100 = replace(H100, name="a100-sxm4-80gb", architecture="ampere")
    fitted = default_profile(a100).with_coefficients(gemm_efficiency=0.8, dp_overlap=0.7)
    prof = transfer_profile(fitted, a100, H100, only=("gemm_efficiency", "dp_overlap"))
    assert prof.tp_overlap == default_profile(H100).tp_overlap != fitted.tp_overlap
    assert prof.dp_overlap == 0.7
    assert prof.gemm_efficiency == default_profile(H100).gemm_efficiency  # chip: other die
    assert prof.provenance["transferred"] == ["dp_overlap"]
