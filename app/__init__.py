"""The service: HTTP API, database, jobs, web UI, CLI and SDK."""
