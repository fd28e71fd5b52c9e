"""Storage: rows, engine, migrations and repositories (the only place that builds SQL)."""
