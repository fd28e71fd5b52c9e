"""Schemas of API-key management (``/v1/keys``, admin scope)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.schemas import RequestModel

Scope = Literal["read", "plan", "admin"]


class ApiKeyCreate(RequestModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"scopes": ["plan"], "name": "ci"}]}
    )

    scopes: list[Scope] = Field(min_length=1, max_length=3, description="admin > plan > read")
    name: str = Field(default="", max_length=128, description="a label for listings")


class ApiKeyRead(BaseModel):
    id: str
    prefix: str = Field(description="the key's public part: pp_<prefix>_...")
    name: str
    scopes: list[Scope]
    created_at: str
    revoked_at: str | None


class ApiKeyCreated(ApiKeyRead):
    key: str = Field(description="the key itself; shown only in this response")


class ApiKeyList(BaseModel):
    items: list[ApiKeyRead]
