"""Jinja2 templates and static files of the web UI, built per app (never at import time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

HERE = Path(__file__).parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
STATIC_PREFIX = "/static"


def static_url(path: str) -> str:
    return f"{STATIC_PREFIX}/{path}"


def templates(app: Any) -> Jinja2Templates:
    """The app's template environment, made on first use and kept on ``app.state``."""
    found: Jinja2Templates | None = getattr(app.state, "web_templates", None)
    if found is None:
        found = Jinja2Templates(directory=str(TEMPLATES_DIR))
        found.env.globals["static_url"] = static_url
        app.state.web_templates = found
    return found


def mount_static(app: Any) -> None:
    """Serve ``app/web/static`` (the CSS, the page script and the vendored libraries)."""
    app.mount(STATIC_PREFIX, StaticFiles(directory=str(STATIC_DIR)), name="static")
