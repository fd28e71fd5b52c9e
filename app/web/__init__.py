"""The web UI: server-rendered pages (Jinja2 + htmx, vendored Chart.js), no JS build step.

Wire it into an app with::

    from app.web import mount_static, router
    app.include_router(router)
    mount_static(app)
"""

from app.web.batch_page import router as _batch_router
from app.web.calibration import router as _calibration_router
from app.web.calibration_result import router as _calibration_result_router
from app.web.catalog import router as _catalog_router
from app.web.catalog_delete import router as _catalog_delete_router
from app.web.cluster_form import router as _cluster_form_router
from app.web.detached import router as _detached_router
from app.web.gpu_form import router as _gpu_form_router
from app.web.routes import router
from app.web.scaling import router as _scaling_router
from app.web.templating import mount_static

router.include_router(_catalog_router)
router.include_router(_catalog_delete_router)
router.include_router(_cluster_form_router)
router.include_router(_gpu_form_router)
router.include_router(_calibration_router)
router.include_router(_calibration_result_router)
router.include_router(_detached_router)
router.include_router(_scaling_router)
router.include_router(_batch_router)

__all__ = ["mount_static", "router"]
