"""The shipped noise pairs as the result pages quote them, read from the code.

Hand-written readings (``bench/small_models_reading.md``, ``bench/fidelity_reading.md``) say
``{shipped_noise}`` where they name the noise the calibration ships with; the bench that appends
them puts this sentence there, so a re-run quotes ``planner/calibration/regularised.py`` as it is
then, not the pair of the day the reading was written.
"""

from __future__ import annotations

from planner.calibration.noise import NoiseModel
from planner.calibration.regularised import FIT_NOISE, NOISE

PLACEHOLDER = "{shipped_noise}"


def _pair(noise: NoiseModel) -> str:
    return (
        f"sigma_w {noise.within_log_sd:.3f}, sigma_b {noise.shared_log_sd:.3f} "
        f"(rho {noise.rho:.2f})"
    )


def shipped_noise() -> str:
    """One sentence naming both shipped pairs and their roles."""
    return (
        f"prediction noise `NOISE` {_pair(NOISE)} and fit weighting `FIT_NOISE` "
        f"{_pair(FIT_NOISE)} (`planner/calibration/regularised.py`, `bench/results/noise.md`)"
    )


def fill(lines: list[str]) -> list[str]:
    """``lines`` with :data:`PLACEHOLDER` replaced by :func:`shipped_noise`."""
    text = shipped_noise()
    return [line.replace(PLACEHOLDER, text) for line in lines]
