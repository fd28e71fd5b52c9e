"""Run the service with the web UI for browser tests: ``python serve.py PORT DATA_DIR [real]``.

Without ``real`` the planning backend is the canned stand-in from ``fake_planning.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).parent))

from fake_planning import catalog_source, fake_backend

from app.core.settings import Settings
from app.main import create_app
from app.web import mount_static, router


def main() -> None:
    port, data_dir = int(sys.argv[1]), Path(sys.argv[2])
    real = len(sys.argv) > 3 and sys.argv[3] == "real"
    settings = Settings(data_dir=data_dir, job_poll_s=0.05, job_heartbeat_s=0.2)
    step_s = float(os.environ.get("PLANNER_FAKE_STEP_S", "0"))  # a slow canned search
    backend = None if real else fake_backend(step_s=step_s)
    app = create_app(settings, backend=backend, catalog=catalog_source)
    if not any(getattr(r, "path", None) == "/plans/{job_id}" for r in app.routes):
        app.include_router(router)
    if not any(getattr(r, "path", None) == "/static" for r in app.routes):
        mount_static(app)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
