"""Pydantic API schemas (``...Create`` / ``...Read``); rows and domain types never leak out."""

from app.schemas.catalog import (
    CatalogEntryCreate,
    CatalogEntryRead,
    CatalogEntryUpdate,
    CatalogList,
    ClusterPresetSpec,
    HFImport,
)
from app.schemas.common import Page, Problem, ProblemField
from app.schemas.jobs import (
    CalibrationList,
    CalibrationRead,
    EvaluationRequest,
    MeasurementList,
    MeasurementRead,
    MeasurementsCreated,
    PlanJobCreate,
    PlanJobPage,
    PlanJobRead,
)

__all__ = [
    "CalibrationList",
    "CalibrationRead",
    "CatalogEntryCreate",
    "CatalogEntryRead",
    "CatalogEntryUpdate",
    "CatalogList",
    "ClusterPresetSpec",
    "EvaluationRequest",
    "HFImport",
    "MeasurementList",
    "MeasurementRead",
    "MeasurementsCreated",
    "Page",
    "PlanJobCreate",
    "PlanJobPage",
    "PlanJobRead",
    "Problem",
    "ProblemField",
]
