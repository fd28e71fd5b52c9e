"""Schemas of uploaded measurements and fitted calibrations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class MeasurementsCreated(BaseModel):
    cluster: str
    added: int
    total: int


class MeasurementRead(BaseModel):
    id: int
    source: str
    data: dict[str, Any]
    created_at: datetime


class MeasurementList(BaseModel):
    cluster: str
    items: list[MeasurementRead]


class CalibrationRead(BaseModel):
    id: int
    cluster: str
    num_measurements: int
    profile: dict[str, Any]
    report: dict[str, Any]
    created_at: datetime


class CalibrationDetail(CalibrationRead):
    """One calibration with what its page shows."""

    comparison: dict[str, Any] = Field(
        description="the rows it was fitted on, predicted before (the shipped profile) and "
        "after (its profile), with the errors and the coefficients: stored with the fit"
    )


class CalibrationList(BaseModel):
    items: list[CalibrationRead]


class DetachedCluster(BaseModel):
    """Rows left by a deleted cluster, under the name they were stored with."""

    cluster: str
    measurements: int
    calibrations: int
    first_stored_at: datetime
    last_stored_at: datetime


class DetachedList(BaseModel):
    items: list[DetachedCluster]


class DetachedRows(BaseModel):
    cluster: str
    measurements: list[MeasurementRead]
    calibrations: list[CalibrationRead]


class DetachedDeleted(BaseModel):
    measurements: int
    calibrations: int
