"""Jinja2 templates and static files of the web UI, built per app (never at import time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from app.web import wording
from app.web.present import FILTERS

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
        found.env.globals["auth_enabled"] = _auth_enabled(app)
        found.env.filters.update(FILTERS)  # one precision per unit on every page
        found.env.filters.update(wording.FILTERS)
        app.state.web_templates = found
    return found


def _auth_enabled(app: Any) -> bool:
    """Whether pages need a sign-in (so the navigation links the login page)."""
    authenticator = getattr(app.state, "authenticator", None)
    return bool(getattr(authenticator, "enabled", False))


def mount_static(app: Any) -> None:
    """Serve ``app/web/static`` (the CSS, the page script and the vendored libraries)."""
    app.mount(STATIC_PREFIX, StaticFiles(directory=str(STATIC_DIR)), name="static")
