"""Web UI sign-in: ``/login`` takes an API key and sets a signed session cookie; every page then
needs that session, and every form POST the session's CSRF token (hidden ``csrf_token`` field,
or the ``X-CSRF-Token`` header for scripted requests). Nothing to do when ``PLANNER_AUTH=none``.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.core.errors import AppError
from app.core.session import CSRF_FIELD, SESSION_COOKIE, csrf_ok
from app.keys.auth import READ_METHODS, ForbiddenError, get_authenticator
from app.security.ratelimit import charge

router = APIRouter(include_in_schema=False)
ADMIN_PAGES = ("/catalog", "/calibration")
"""Form POSTs that change shared data need the admin scope (as their API routes do)."""
SEARCH_PAGES = {"/scaling": "POST /v1/scaling-curves"}
"""Pages whose GET runs a search (``?run``): the plan scope, as their API twin needs."""


def _safe_next(target: str | None) -> str:
    """Only a local path (never another site) to return to after signing in."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def web_guard(request: Request) -> None:
    """A dependency of every web page: signed in (else to /login), scope, CSRF on POSTs."""
    auth = get_authenticator(request)
    if not auth.enabled:
        return
    web = auth.web_session(request)
    principal = auth.verify_session(web) if web is not None else None
    if web is None or principal is None:
        target = "/login?next=" + quote(_safe_next(request.url.path), safe="/")
        raise AppError(
            "sign in first", status_code=303, headers={"Location": target, "HX-Redirect": target}
        )
    charge(request, principal.key_id)  # the session's key pays, as its API twin would
    request.state.principal = principal
    request.state.csrf_token = web.csrf
    twin = SEARCH_PAGES.get(request.url.path)
    if twin and "run" in request.query_params and not principal.allows("plan"):
        raise ForbiddenError(
            f"your API key lacks the 'plan' scope this search needs (as {twin} does)"
        )
    if request.method in READ_METHODS:
        return
    token = request.headers.get("x-csrf-token")
    if token is None:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        token = value if isinstance(value, str) else None
    if not csrf_ok(web, token):
        raise ForbiddenError("the form's CSRF token is missing or wrong; reload the page")
    needed = "admin" if request.url.path.startswith(ADMIN_PAGES) else "plan"
    if not principal.allows(needed):
        raise ForbiddenError(f"your API key lacks the {needed!r} scope this form needs")


def _login_page(request: Request, error: str = "", status_code: int = 200) -> HTMLResponse:
    from app.web.templating import templates

    return templates(request.app).TemplateResponse(
        request,
        "login.html",
        {"error": error, "next": _safe_next(request.query_params.get("next")), "nav": "login"},
        status_code=status_code,
    )


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    return _login_page(request)


@router.post("/login", response_model=None)
def login(
    request: Request,
    api_key: Annotated[str, Form(max_length=200)] = "",
    next_page: Annotated[str, Form(alias="next", max_length=2000)] = "/",
) -> Response:
    auth = get_authenticator(request)
    if not auth.enabled:
        return RedirectResponse(_safe_next(next_page), status_code=303)
    principal = auth.verify_key(api_key.strip()) if api_key.strip() else None
    if principal is None or principal.key_id is None or principal.prefix is None:
        return _login_page(request, "That API key is not valid (unknown or revoked).", 401)
    cookie = auth.start_session(principal)
    response = RedirectResponse(_safe_next(next_page), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=int(auth.signer.max_age_s),
        httponly=True,
        samesite="lax",
        secure=request.app.state.settings.env == "production",
    )
    return response


@router.post("/logout", response_model=None)
async def logout(request: Request) -> Response:
    auth = get_authenticator(request)
    web = auth.web_session(request)
    if auth.enabled and web is not None:
        form = await request.form()
        token = request.headers.get("x-csrf-token") or form.get(CSRF_FIELD)
        if not csrf_ok(web, token if isinstance(token, str) else None):
            raise ForbiddenError("the form's CSRF token is missing or wrong; reload the page")
        auth.end_session(web)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response
