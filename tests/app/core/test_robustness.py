"""Robustness: the database going away gives 503 + Retry-After (readyz and writes) and the
service recovers without a restart; SQLite runs in WAL mode with a busy timeout; shutdown puts
running jobs back in the queue; unexpected errors are problem JSON."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.main import create_app
from tests.app.conftest import JOB_70B, SLOW_SEED, FakePlanner, fake_catalog, test_settings

PG_HOST, PG_PORT = "127.0.0.1", 5432
PG_ADMIN_URL = os.environ.get(
    "PLANNER_TEST_POSTGRES_ADMIN_URL", "postgresql+psycopg://postgres:postgres@127.0.0.1:5432/"
)
EVALUATION = dict(JOB_70B)


class TcpProxy:
    """A TCP forwarder to PostgreSQL that the test can cut and restore (a database outage)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


def _postgres_up() -> bool:
    try:
        with socket.create_connection((PG_HOST, PG_PORT), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def proxied_postgres_url() -> Iterator[tuple[str, TcpProxy]]:
    if not _postgres_up():
        pytest.skip("needs PostgreSQL on 127.0.0.1:5432")
    from sqlalchemy import create_engine

    name = f"planner_outage_{os.getpid()}"
    admin = create_engine(PG_ADMIN_URL + "postgres", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # no rights, wrong password: not this machine's setup
        admin.dispose()
        pytest.skip(f"cannot create a PostgreSQL database: {exc}")
    proxy = TcpProxy((PG_HOST, PG_PORT))
    proxy.start()
    yield PG_ADMIN_URL.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}") + name, proxy
    proxy.stop()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.mark.postgres_server
def test_database_outage_is_503_and_the_service_recovers(
    proxied_postgres_url: tuple[str, TcpProxy], tmp_path: Any
) -> None:
    url, proxy = proxied_postgres_url
    settings = test_settings(url, tmp_path, workers=0)
    app = create_app(settings, backend=FakePlanner().backend(), catalog=fake_catalog)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/v1/evaluations", json=EVALUATION).status_code == 200
        proxy.stop()
        ready = client.get("/readyz")
        assert ready.status_code == 503
        write = client.post("/v1/plan-jobs", json={**EVALUATION, "seed": 1})
        assert write.status_code == 503
        assert write.headers["content-type"] == "application/problem+json"
        assert int(write.headers["retry-after"]) > 0
        assert client.get("/v1/models").status_code == 503
        proxy.start()
        deadline = time.monotonic() + 10
        while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.get("/readyz").status_code == 200
        assert client.post("/v1/plan-jobs", json={**EVALUATION, "seed": 2}).status_code == 202


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(client: TestClient) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]
    if not str(engine.url).startswith("sqlite"):
        pytest.skip("SQLite only")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() >= 5000


def test_shutdown_puts_a_running_job_back_in_the_queue(
    make_client: Callable[..., TestClient],
    wait_for: Callable[..., dict[str, Any]],
) -> None:
    client = make_client(shutdown_grace_s=2)
    job = client.post("/v1/plan-jobs", json={**EVALUATION, "seed": SLOW_SEED}).json()
    wait_for(client, job["id"], {"running"}, 10)
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    started = time.monotonic()
    client.__exit__(None, None, None)  # the lifespan's shutdown
    assert time.monotonic() - started < 5
    from app.planning.repository import PlanJobRepository

    with factory() as session:
        row = PlanJobRepository(session).get(job["id"])
        assert row is not None
        assert row.status == "queued"
        assert row.worker_id is None


def test_unexpected_errors_are_problem_json(
    make_app: Callable[..., Any],
) -> None:
    app = make_app()

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("kaput")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "kaput" not in response.text
