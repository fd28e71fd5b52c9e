"""Deleting a user entry from the catalog pages: a model, a GPU type or a cluster.

The row's button asks first (a page that deletes on one click loses what a slip of the mouse
hits); the confirmation says what goes with the entry: a cluster's stored measurements and
calibrations, which ``DELETE /v1/clusters/{slug}`` refuses to drop (409) unless ``purge=true``.
A conflict found on the confirmed delete (rows stored in between, a GPU a cluster still uses)
is shown in the page with the way out, never as a bare error.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.core.errors import AppError
from app.web.backend import Backend
from app.web.catalog import page
from app.web.wording import plural

router = APIRouter(include_in_schema=False)

Kind = Literal["models", "gpus", "clusters"]
NOUNS = {"models": "model", "gpus": "GPU type", "clusters": "cluster"}


def _rows_text(counts: tuple[int, int]) -> str:
    measured, fitted = counts
    return f"{plural(measured, 'stored measurement')} and {plural(fitted, 'calibration')}"


def _pending(
    kind: str, slug: str, counts: tuple[int, int] | None, note: str = ""
) -> dict[str, Any]:
    """What the confirmation box says and sends (``purge`` when rows go with the cluster)."""
    noun = NOUNS[kind]
    if counts and any(counts):
        message = (
            f"{note}{noun.capitalize()} {slug!r} has {_rows_text(counts)}; deleting it deletes "
            f"them too. To keep a copy first, download GET /v1/clusters/{slug}/measurements."
        )
        button = f"Delete {slug} and its {_rows_text(counts)}"
    else:
        message = f"{note}Delete {noun} {slug!r}? This cannot be undone."
        button = f"Delete {slug}"
    return {"kind": kind, "slug": slug, "message": message, "button": button,
            "purge": bool(counts and any(counts))}  # fmt: skip


@router.post("/catalog/{kind}/{slug}/delete", response_class=HTMLResponse)
async def delete_entry(
    request: Request,
    backend: Backend,
    kind: Kind,
    slug: Annotated[str, Path(max_length=128)],
) -> Response:
    form = await request.form()
    counts: tuple[int, int] | None = None
    try:
        if kind == "clusters":
            counts = await run_in_threadpool(backend.stored_rows, slug)
        if not form.get("confirm"):
            return page(request, backend, kind, {"pending": _pending(kind, slug, counts)})
        purge = bool(form.get("purge"))
        await run_in_threadpool(backend.delete_entry, kind, slug, purge=purge)
    except AppError as exc:
        if exc.status_code == 409 and kind == "clusters":  # rows stored since it asked
            counts = await run_in_threadpool(backend.stored_rows, slug)
            if any(counts):  # ask again, with their count and the way to delete them too
                box = _pending(kind, slug, counts, note="Not deleted: ")
                return page(request, backend, kind, {"pending": box}, status_code=409)
        error = {"slug": slug, "message": f"Not deleted: {exc.message}"}
        return page(request, backend, kind, {"delete_error": error}, status_code=exc.status_code)
    return RedirectResponse(f"/catalog/{kind}?deleted={quote(slug)}", status_code=303)
