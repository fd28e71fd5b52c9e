"""Alembic environment: the URL from ``-x url=``, the caller's config, or the service Settings."""

from __future__ import annotations

from logging.config import fileConfig

from sqlalchemy import pool
from sqlalchemy.engine import create_engine

from alembic import context
from app.auth import models as auth_models  # noqa: F401  (the api_key row)
from app.db import models  # noqa: F401  (registers the rows on the metadata)
from app.db.base import Base
from app.db.engine import make_engine
from app.security import sessions  # noqa: F401  (the web_session row)

config = context.config
if config.config_file_name and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name)

target_metadata = Base.metadata

# Optuna's RDB storage tables (app.jobs.optuna_store keeps them in their own schema or file;
# should someone point it at the app's schema anyway, `alembic check` must not flag them).
OPTUNA_TABLES = frozenset(
    {
        "studies",
        "study_directions",
        "study_user_attributes",
        "study_system_attributes",
        "trials",
        "trial_user_attributes",
        "trial_system_attributes",
        "trial_params",
        "trial_values",
        "trial_intermediate_values",
        "trial_heartbeats",
        "version_info",
    }
)


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Leave Optuna's tables (and their indexes) out of autogenerate and ``alembic check``."""
    if type_ == "table" and reflected and compare_to is None and name in OPTUNA_TABLES:
        return False
    table = getattr(getattr(obj, "table", None), "name", None)
    return not (reflected and compare_to is None and table in OPTUNA_TABLES)


def _url() -> str:
    x_args = context.get_x_argument(as_dictionary=True)
    if x_args.get("url"):
        return x_args["url"]
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from app.settings import Settings

    return Settings().database_url


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = _url()
    engine = (
        make_engine(url)
        if url.startswith("sqlite")
        else create_engine(url, poolclass=pool.NullPool)
    )
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            compare_type=True,
            include_object=include_object,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
