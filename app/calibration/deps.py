"""Calibration dependencies: what the calibration service needs from the planning backend.

The app's backend (``app.state.backend``, a ``PlanningBackend``) has these two functions; the
calibration domain names only them, so that it does not depend on the planning domain.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import Depends, Request


class CalibrationBackend(Protocol):
    @property
    def check_measurements(self) -> Any:
        """Rows -> how many are usable; SpecError when none is."""

    @property
    def calibrate(self) -> Any:
        """(rows, gpu slug) -> (profile JSON, report with cross-validated error)."""


async def get_calibration_backend(request: Request) -> CalibrationBackend:
    backend: CalibrationBackend = request.app.state.backend
    return backend


CalibrationBackendDep = Annotated[CalibrationBackend, Depends(get_calibration_backend)]
