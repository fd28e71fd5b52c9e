"""Who may see a plan job or a batch: the key that made it, or an admin.

A job (and a batch) records the id of the API key that submitted it. Reading, cancelling or
fetching the plans of another key's job needs the admin scope; listings show a key only its own
jobs unless it is admin. Without auth (``PLANNER_AUTH=none``) everyone is admin, so nothing is
hidden. Services take a :class:`Viewer`; internal callers (workers, the CLI) pass none and see
everything.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.core.errors import AppError


class NotYoursError(AppError):
    status_code = 403


@dataclass(frozen=True, slots=True, kw_only=True)
class Viewer:
    """The caller as ownership sees it."""

    key_id: str | None
    """The verified key's id (None: no stored key, as with ``PLANNER_AUTH=none``)."""
    admin: bool
    """Admins see and cancel every job."""

    def owner_filter(self) -> tuple[bool, str | None]:
        """(filter?, owner id): listings of a non-admin keep only the rows it owns."""
        return (not self.admin, self.key_id)

    def check(self, owner_key_id: str | None, what: str) -> None:
        """403 unless the caller owns the row or is admin."""
        if self.admin or owner_key_id == self.key_id:
            return
        raise NotYoursError(
            f"{what} belongs to another API key; reading or cancelling another key's job needs "
            "the admin scope"
        )

    def idempotency_key(self, key: str | None) -> str | None:
        """Idempotency keys are per API key: another key's ``Idempotency-Key: x`` is another
        job (and never returns this key's job)."""
        if key is None or self.key_id is None:
            return key
        return "k:" + hashlib.sha256(f"{self.key_id}\0{key}".encode()).hexdigest()


def viewer_of(request: Request) -> Viewer:
    """The viewer of a request that ``require_scope`` (or the web guard) let through."""
    principal = getattr(request.state, "principal", None)
    if principal is None:  # auth off and no guard ran: the development default is open
        return Viewer(key_id=None, admin=not request.app.state.authenticator.enabled)
    return Viewer(key_id=principal.key_id, admin=principal.allows("admin"))


ViewerDep = Annotated[Viewer, Depends(viewer_of)]
