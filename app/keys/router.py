"""``/v1/keys``: create (the key is in this one response only), list and revoke API keys.

Every route needs the ``admin`` scope (GETs included)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, status

from app.core.deps import FactoryDep, SessionDep
from app.core.engine import unit_of_work
from app.core.schemas import problem_responses
from app.keys.auth import get_authenticator
from app.keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyRead
from app.keys.service import ApiKeyStore

router = APIRouter(prefix="/v1/keys", tags=["keys"])
KeyId = Annotated[str, Path(max_length=64, description="the key's id or public prefix")]


@router.post(
    "",
    response_model=ApiKeyCreated,
    status_code=status.HTTP_201_CREATED,
    responses=problem_responses(422),
    summary="Create an API key (the response is the only place the key ever appears)",
    operation_id="create_api_key",
)
def create_key(body: ApiKeyCreate, session: SessionDep) -> ApiKeyCreated:
    key, info = ApiKeyStore(session).create(body.scopes, body.name)
    return ApiKeyCreated(key=key, **info.to_dict())  # type: ignore[arg-type]


@router.get(
    "",
    response_model=ApiKeyList,
    summary="List API keys (prefixes and scopes, never the keys)",
    operation_id="list_api_keys",
)
def list_keys(session: SessionDep) -> ApiKeyList:
    return ApiKeyList(
        items=[ApiKeyRead(**k.to_dict()) for k in ApiKeyStore(session).list()]  # type: ignore[arg-type]
    )


@router.delete(
    "/{key_id}",
    response_model=ApiKeyRead,
    responses=problem_responses(404, 422),
    summary="Revoke an API key (it stops working at once here, within 5 s elsewhere)",
    description="Idempotent: the key stays, listed as revoked; revoking it again (or twice at "
    "once) answers it as the first revocation left it.",
    operation_id="revoke_api_key",
)
def revoke_key(key_id: KeyId, factory: FactoryDep, request: Request) -> ApiKeyRead:
    with unit_of_work(factory) as session:  # committed before the cached key is forgotten
        info = ApiKeyStore(session).revoke(key_id)
    get_authenticator(request).forget()
    return ApiKeyRead(**info.to_dict())  # type: ignore[arg-type]
