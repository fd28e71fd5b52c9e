"""The Optuna storage of fanned-out searches: its own SQLite file or PostgreSQL schema.

Optuna's RDB storage keeps its own tables *and its own* ``alembic_version`` table, so it must
never share a schema with the app's Alembic-managed tables: next to a SQLite app database it is
the file ``{data_dir}/optuna.db``; next to a PostgreSQL one it is the schema ``optuna`` of the
same database (``?options=-csearch_path=optuna`` on the URL). ``optuna-dashboard <url>`` opens it.

Every part of a fanned-out plan job records its ranked layouts as finished trials of one study
named ``plan-<parent job id>``, so the whole search across workers reads as one study.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.core.settings import Settings

OPTUNA_SCHEMA = "optuna"
RECOMPUTE = ("none", "selective", "full")
SHARDING = ("none", "optimizer", "full")
INT_PARAMS = ("tp", "pp", "vpp", "cp", "ep", "etp", "dp", "micro_batch_size")
INT_HIGH = 1 << 24
ADVISORY_LOCK_KEY = 0x0970_0A5A  # any constant shared by every worker


def storage_url(settings: Settings) -> str:
    """The Optuna storage URL the settings name (see the module docstring for the defaults)."""
    if settings.optuna_storage_url:
        return settings.optuna_storage_url
    if settings.is_sqlite:
        return f"sqlite:///{settings.data_dir}/optuna.db"
    url = make_url(settings.database_url)
    query = dict(url.query)
    query["options"] = f"-csearch_path={OPTUNA_SCHEMA}"
    return url.set(query=query).render_as_string(hide_password=False)


def _schema_of(url: str) -> str | None:
    """The PostgreSQL schema that ``options=-csearch_path=...`` names, if any."""
    parsed = make_url(url)
    options = str(parsed.query.get("options", ""))
    if not parsed.get_backend_name().startswith("postgresql") or "search_path=" not in options:
        return None
    schema = options.split("search_path=", 1)[1].split()[0].split(",")[0]
    if not schema.isidentifier():
        raise ValueError(f"bad Optuna schema name {schema!r} in the storage URL")
    return schema


def open_storage(url: str) -> Any:
    """An ``optuna.storages.RDBStorage`` at ``url`` (schema and tables created on first use).

    On PostgreSQL the creation runs under an advisory lock: workers starting together would
    otherwise race on Optuna's ``CREATE TYPE`` / ``CREATE TABLE``.
    """
    import optuna

    schema = _schema_of(url)
    if schema is None:
        if url.startswith("sqlite:///"):
            from pathlib import Path

            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
    parsed = make_url(url)
    plain = parsed.set(query={k: v for k, v in parsed.query.items() if k != "options"})
    engine = create_engine(plain, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
            try:
                conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
                return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": ADVISORY_LOCK_KEY})
    finally:
        engine.dispose()


def study_name(parent_id: str) -> str:
    return f"plan-{parent_id}"


def _value(plan: dict[str, Any]) -> float | None:
    objective = plan.get("objective") or {}
    value = objective.get("value")
    if value is None:
        value = (plan.get("performance") or {}).get("tokens_per_s_per_gpu")
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def record_part(
    storage: Any,
    parent_id: str,
    job_id: str,
    worker_id: str,
    part: dict[str, Any],
    result: dict[str, Any],
) -> int:
    """Add a finished part's ranked layouts to its parent's study; returns the trials added."""
    import optuna

    plans = [p for p in result.get("plans", []) if _value(p) is not None]
    if not plans:
        return 0
    direction = (plans[0].get("objective") or {}).get("direction", "maximize")
    study = optuna.create_study(
        storage=storage,
        study_name=study_name(parent_id),
        direction=direction,
        load_if_exists=True,
    )
    recorded = {t.user_attrs.get("job_id") for t in study.get_trials(deepcopy=False)}
    if job_id in recorded:  # a re-run of a part that was recorded before its worker died
        return 0
    ints = optuna.distributions.IntDistribution(1, INT_HIGH)
    trials = []
    for rank, found in enumerate(plans, start=1):
        layout = found.get("layout") or {}
        params: dict[str, Any] = {
            "num_gpus": int(part["num_gpus"]),
            "global_batch_size": int(part["global_batch_size"]),
        }
        dists: dict[str, Any] = {"num_gpus": ints, "global_batch_size": ints}
        for name in INT_PARAMS:
            if isinstance(layout.get(name), int) and 1 <= layout[name] <= INT_HIGH:
                params[name], dists[name] = layout[name], ints
        for name, choices in (("recompute", RECOMPUTE), ("optimizer_sharding", SHARDING)):
            if layout.get(name) in choices:
                params[name] = layout[name]
                dists[name] = optuna.distributions.CategoricalDistribution(choices)
        trials.append(
            optuna.trial.create_trial(
                params=params,
                distributions=dists,
                value=_value(found),
                user_attrs={"job_id": job_id, "worker_id": worker_id, "rank": rank},
            )
        )
    study.add_trials(trials)
    return len(trials)
