"""Service settings: one pydantic-settings class, read from ``PLANNER_*`` environment variables.

Nothing here runs at import time; the app factory and the CLI build a ``Settings`` when asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything the service can be told from outside (env prefix ``PLANNER_``)."""

    # no input in error messages: a start-up error would otherwise echo the tail of the input
    # (PLANNER_SECRET_KEY, a database password) into the terminal and the logs
    model_config = SettingsConfigDict(
        env_prefix="PLANNER_", extra="ignore", hide_input_in_errors=True
    )

    data_dir: Path = Path("./data")
    """Folder for the embedded SQLite database and other local state."""
    database_url: str = ""
    """SQLAlchemy URL; empty means ``sqlite:///{data_dir}/planner.db``."""
    workers: int = Field(default=1, ge=0, le=64)
    """In-process plan-job worker threads (0 = this process only serves the API)."""
    job_poll_s: float = Field(default=0.5, gt=0, le=60)
    """How often an idle worker looks for queued jobs (it is also woken on submission)."""
    job_heartbeat_s: float = Field(default=2.0, gt=0, le=600)
    """How often a running job's heartbeat (and cancel flag) is written and read."""
    job_stale_after_s: float = Field(default=30.0, gt=0, le=86400)
    """A running job whose heartbeat is older than this is taken to be orphaned and re-queued."""
    job_max_attempts: int = Field(default=5, ge=1, le=100)
    """A job that has been claimed this many times without finishing is failed."""
    fan_out_min_scenarios: int = Field(default=0, ge=0, le=4096)
    """A plan job over at least this many (GPU count x batch size) combinations is split into
    one queued part per combination that any worker can run; its result merges the parts
    (0 = never split)."""
    optuna_storage_url: str = ""
    """Optuna storage of fanned-out searches (never the app's tables); empty means a SQLite
    file ``{data_dir}/optuna.db`` next to a SQLite app database, or the schema ``optuna`` of a
    PostgreSQL app database."""
    max_wait_s: float = Field(default=60.0, ge=0, le=600)
    """Upper bound of ``?wait=`` on job submission."""
    seed_catalog: bool = True
    """Copy the built-in catalog from ``models_db`` into the database at start-up."""
    migrate_on_start: bool = True
    """Run Alembic migrations when the app starts."""
    env: Literal["development", "production"] = "development"
    """``production`` refuses to start without API keys and a real secret key."""
    auth: Literal["none", "api-key"] = "none"
    """``api-key``: every ``/v1`` request needs an ``X-API-Key`` with the route's scope (see
    app/keys); ``none`` (local development only) lets everyone do everything."""
    secret_key: SecretStr = SecretStr("")
    """Signs the web UI's session cookies; at least 32 characters, not a placeholder, in
    production. Empty in development means a random one per process."""
    max_body_bytes: int = Field(default=2**20, ge=1024, le=2**30)
    """Largest request body (413 above it)."""
    max_upload_bytes: int = Field(default=16 * 2**20, ge=1024, le=2**31)
    """Largest body of a measurements upload (CSV / Megatron log)."""
    rate_limit_per_s: float = Field(default=50.0, ge=0, le=1e6)
    """Sustained cost units per second per verified API key (per client address without auth;
    a read costs 1, a plan job 10, a batch 20: app/security/ratelimit.py); 0 = no limit."""
    rate_limit_burst: int = Field(default=200, ge=1, le=1_000_000)
    """Cost units a key may spend at once before the per-second rate applies (bucket size)."""
    rate_limit_ip_per_s: float = Field(default=200.0, ge=0, le=1e6)
    """Sustained cost units per second per client address, checked before authentication
    (looser than per key: several keys may share an address); 0 = no limit."""
    rate_limit_ip_burst: int = Field(default=800, ge=1, le=1_000_000)
    """Cost units an address may spend at once (bucket size)."""
    metrics_public: bool = False
    """Serve ``/metrics`` without a key even when auth is on (only where the port is reachable
    by the scraper alone); otherwise a scrape needs a read-scope key."""
    hsts: bool = False
    """Send ``Strict-Transport-Security`` on every response (TLS ends in front of the service);
    it is sent anyway on requests that arrive over https or with X-Forwarded-Proto: https."""
    header_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """``planner serve``: a connection whose request headers are not complete this long after
    it opened (or after its last response) is dropped (app/security/transport.py)."""
    body_timeout_s: float = Field(default=30.0, ge=0, le=3600)
    """A request body that pauses longer than this between chunks gets 408 (0 = no deadline)."""
    job_time_budget_s: float = Field(default=3600.0, gt=0, le=7 * 86400)
    """A plan job running longer than this fails with an error that says so."""
    shutdown_grace_s: float = Field(default=10.0, ge=0, le=600)
    """On shutdown, how long running jobs get to stop before they are put back in the queue."""
    log_format: Literal["json", "text"] = "json"
    """Log lines as JSON objects (with request and job ids) or plain text."""
    log_level: str = "info"

    @model_validator(mode="after")
    def _default_database_url(self) -> Settings:
        if not self.database_url:
            self.database_url = f"sqlite:///{self.data_dir}/planner.db"
        return self

    @model_validator(mode="after")
    def _production_is_locked_down(self) -> Settings:
        if self.env != "production":
            return self
        if self.auth != "api-key":
            raise ValueError(
                "PLANNER_ENV=production requires PLANNER_AUTH=api-key (auth=none is only for "
                "local development)"
            )
        from app.core.session import check_secret_key

        check_secret_key(self.secret_key.get_secret_value())
        return self

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
