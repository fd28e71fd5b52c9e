"""Every storage row in one place, so that ``Base.metadata`` knows all the tables.

Alembic's autogenerate (``alembic/env.py``) and anything that creates or checks the schema import
this module; the domains import only their own rows.
"""

from app.batches.models import BatchRow
from app.calibration.models import CalibrationRow, MeasurementRow
from app.catalog.models import CatalogEntryRow, CatalogVersionRow
from app.core.database import Base
from app.keys.models import ApiKeyRow
from app.planning.models import PlanJobRow

__all__ = [
    "ApiKeyRow",
    "Base",
    "BatchRow",
    "CalibrationRow",
    "CatalogEntryRow",
    "CatalogVersionRow",
    "MeasurementRow",
    "PlanJobRow",
]
