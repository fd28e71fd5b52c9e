"""Security layers of the service: rate limits, headers, transport deadlines, ownership."""
