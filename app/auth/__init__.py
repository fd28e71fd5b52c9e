"""Authentication: API keys with scopes, web sessions with CSRF tokens (see app/auth/deps)."""

from app.auth.deps import Authenticator, require_scope
from app.auth.keys import SCOPES, ApiKeyStore, Principal
from app.auth.models import ApiKeyRow

__all__ = ["SCOPES", "ApiKeyRow", "ApiKeyStore", "Authenticator", "Principal", "require_scope"]
