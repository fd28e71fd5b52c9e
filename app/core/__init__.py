"""Shared service plumbing: settings, database engine and unit of work, errors, middleware."""
