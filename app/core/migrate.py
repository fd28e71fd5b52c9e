"""Run Alembic migrations from code (start-up, ``planner migrate``, tests)."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config

from alembic import command

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT_LOCATION = REPO_ROOT / "alembic"


def alembic_config(database_url: str) -> Config:
    """An Alembic config that points at the repository's ``alembic/`` folder and ``database_url``.

    Works from any working directory (the path is found from this file, which an editable
    install keeps in the checkout).
    """
    ini = REPO_ROOT / "alembic.ini"
    config = Config(str(ini)) if ini.exists() else Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the database at ``database_url`` to ``revision``."""
    command.upgrade(alembic_config(database_url), revision)


def check(database_url: str) -> None:
    """Raise if the models and the migrations disagree (``alembic check``)."""
    command.check(alembic_config(database_url))
