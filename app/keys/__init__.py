"""Authentication: API keys with scopes, web sessions with CSRF tokens (see app/keys/auth)."""

from app.keys.auth import Authenticator, require_scope
from app.keys.models import ApiKeyRow
from app.keys.service import SCOPES, ApiKeyStore, Principal

__all__ = ["SCOPES", "ApiKeyRow", "ApiKeyStore", "Authenticator", "Principal", "require_scope"]
