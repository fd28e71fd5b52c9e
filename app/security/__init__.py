"""Security layers of the service: rate limits, headers, sessions and CSRF, ownership."""
