"""The CLI's way into the one typed request of each question.

Flags become the same request the API takes (``EvaluationRequest``, ``PlanJobCreate``), validated
with the same bounds and messages, each bad field named by its flag (``--num-gpus``). Two flags
exist only here: ``--cluster SLUG`` (a preset, or a user cluster in the server's database whose
newest calibration becomes the profile) and ``--profile FILE`` (a fitted profile JSON from
``planner calibrate --output``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from app.cli.common import fail, inline_model_file

if TYPE_CHECKING:
    from planner import PerformanceProfile

Request = TypeVar("Request", bound=BaseModel)


def build_request(
    schema: type[Request],
    options: dict[str, Any],
    *,
    profile_file: Path | None = None,
    server_cluster: bool = True,
) -> tuple[Request, PerformanceProfile | None]:
    """The typed request of ``options`` (unset flags left out) and the profile to run it with.

    ``server_cluster=False`` leaves ``--cluster`` for a remote server to resolve.
    """
    from app.cli.memory_options import cli_memory_values
    from app.planning.convert import expand_text_lists, flag_label, parse_request
    from app.planning.schemas import PlanJobCreate
    from planner import SpecError

    data = {k: v for k, v in options.items() if v is not None}
    if "model" in data:
        data["model"] = inline_model_file(data["model"])
    try:
        data = cli_memory_values(data, lists=issubclass(schema, PlanJobCreate))
        if issubclass(schema, PlanJobCreate):  # lists and ranges: '1,2,4', '64-1024'
            data = expand_text_lists(data)
        profile = None
        if server_cluster and data.get("cluster") is not None:
            data, profile = with_server_cluster(data)
        request = parse_request(schema, data, label=flag_label)
        if profile_file is not None:
            profile = load_profile_file(profile_file, request)
    except SpecError as exc:
        fail(exc.message, field=exc.field)
    return request, profile


def with_server_cluster(data: dict[str, Any]) -> tuple[dict[str, Any], PerformanceProfile | None]:
    """``--cluster`` resolved as the service resolves it, from the server's database when there
    is one (user clusters, calibrations); a built-in preset needs no database."""
    from app.core.settings import Settings

    settings = Settings()
    url = settings.database_url
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        return data, None  # no local service database: built-in presets only
    from sqlalchemy.exc import SQLAlchemyError

    from app.core.engine import make_engine, make_session_factory, unit_of_work
    from app.core.errors import AppError
    from app.planning.service import resolve_references
    from planner import PerformanceProfile, SpecError

    engine = make_engine(url)
    try:
        with unit_of_work(make_session_factory(engine)) as session:
            request, resolved = resolve_references(session, data)
    except AppError as exc:
        field = exc.errors[0]["field"] if exc.errors else "cluster"
        raise SpecError(exc.message, field=field) from exc
    except SQLAlchemyError:  # a database without the catalog yet: built-in presets only
        return data, None
    finally:
        engine.dispose()
    stored = resolved.get("profile")
    return request, PerformanceProfile.from_dict(stored["profile"]) if stored else None


def load_profile_file(path: Path, request: BaseModel) -> PerformanceProfile:
    """A profile JSON: one profile, or ``planner calibrate --output``'s ``{gpu: profile}``."""
    from app.planning.convert import resolve_gpu
    from planner import PerformanceProfile, SpecError

    try:
        data = json.loads(path.expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror}", field="profile") from exc
    except ValueError as exc:
        raise SpecError(f"{path} is not JSON: {exc}", field="profile") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a profile object", field="profile")
    if data and all(isinstance(v, dict) for v in data.values()):  # {gpu slug: profile}
        gpu = resolve_gpu(request).name  # type: ignore[arg-type]
        if gpu not in data:
            raise SpecError(
                f"{path} has profiles for {', '.join(data)}, not for {gpu}", field="profile"
            )
        data = data[gpu]
    try:
        return PerformanceProfile.from_dict(data)
    except (SpecError, TypeError, ValueError, KeyError) as exc:
        raise SpecError(f"{path}: not a performance profile ({exc})", field="profile") from exc
