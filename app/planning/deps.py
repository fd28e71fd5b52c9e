"""Planning dependencies: the planning backend and the worker pool (from app.state)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.planning.backend import PlanningBackend
from app.planning.worker import WorkerPool


async def get_pool(request: Request) -> WorkerPool | None:
    pool: WorkerPool | None = request.app.state.worker_pool
    return pool


async def get_backend(request: Request) -> PlanningBackend:
    backend: PlanningBackend = request.app.state.backend
    return backend


PoolDep = Annotated[WorkerPool | None, Depends(get_pool)]
BackendDep = Annotated[PlanningBackend, Depends(get_backend)]
