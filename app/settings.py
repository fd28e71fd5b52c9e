"""Service settings: one pydantic-settings class, read from ``PLANNER_*`` environment variables.

Nothing here runs at import time; the app factory and the CLI build a ``Settings`` when asked.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything the service can be told from outside (env prefix ``PLANNER_``)."""

    model_config = SettingsConfigDict(env_prefix="PLANNER_", extra="ignore")

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
    job_runner: str = "app.planning:plan_request"
    """``module:function`` that runs a plan request (plan_request's signature)."""
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
    api_key: str | None = None
    """If set, every ``/v1`` request needs ``Authorization: Bearer <key>``."""
    log_level: str = "info"

    @model_validator(mode="after")
    def _default_database_url(self) -> Settings:
        if not self.database_url:
            self.database_url = f"sqlite:///{self.data_dir}/planner.db"
        return self

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
