"""Dependencies: settings and the request's unit of work (from app.state).

Those that only read ``app.state`` are ``async def``: FastAPI runs a plain ``def`` dependency
in the threadpool, a hand-off that costs more than the look-up (issue 16's latency).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from app.core.engine import unit_of_work
from app.core.settings import Settings


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_session_factory(request: Request) -> sessionmaker[Session]:
    factory: sessionmaker[Session] = request.app.state.session_factory
    return factory


def get_session(request: Request) -> Iterator[Session]:
    """One unit of work per request: commit when the route returns, roll back if it raises."""
    with unit_of_work(request.app.state.session_factory) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
FactoryDep = Annotated[sessionmaker[Session], Depends(get_session_factory)]
