"""A PostgreSQL server of the fault suite's own: a fresh data directory in /tmp, on a free port,
removed afterwards.

test_faults stops PostgreSQL for 10 s. Stopping the machine's shared cluster would fail whatever
else uses it meanwhile: other xdist workers, another suite run on the same machine, a developer's
``planner serve``. A server nobody else knows about can be stopped freely, and the test no longer
depends on the shared one's version, port or password.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from tests.faults.conftest import free_port

_OWNER = "postgres"
"""Who runs the server when the tests run as root (PostgreSQL refuses to run as root)."""


def _bin_dir() -> Path | None:
    """The newest PostgreSQL server binaries: Debian's /usr/lib/postgresql/N/bin, else PATH."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for folder in reversed(found):
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


def unavailable() -> str | None:
    """Why no throw-away server can be started here (None: one can)."""
    if _bin_dir() is None:
        return "needs the PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(_OWNER)
        except KeyError:
            return f"running as root needs a '{_OWNER}' user to own the throw-away server"
        if shutil.which("runuser") is None:
            return "running as root needs runuser (util-linux) to start the server as postgres"
    return None


class ThrowawayPostgres:
    """``with ThrowawayPostgres() as pg:`` a server at ``pg.url`` (trust login as postgres);
    ``pg.stop()`` / ``pg.start()`` take it down and up again; leaving the block deletes it."""

    def __init__(self) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            raise RuntimeError(unavailable())
        self._bin = bin_dir
        self.port = free_port()
        self._base = Path(tempfile.mkdtemp(prefix="planner-faults-pg-"))
        self._data = self._base / "data"
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self._bin / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", _OWNER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stdout}{done.stderr}")

    def __enter__(self) -> ThrowawayPostgres:
        if os.geteuid() == 0:
            shutil.chown(self._base, user=_OWNER)
        try:
            # trust: the server listens on 127.0.0.1 only and lives as long as the test
            self._run("initdb", "-D", str(self._data), "-U", "postgres", "-A", "trust", "-N")
            self.start()
        except BaseException:
            shutil.rmtree(self._base, ignore_errors=True)
            raise
        return self

    def start(self) -> None:
        # the socket goes in the private folder, so nothing under /var/run/postgresql is touched
        options = f"-p {self.port} -k {self._base} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self._base / "server.log")
        self._run("pg_ctl", "-D", str(self._data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self._data), "-m", mode, "-w", "stop")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass  # already stopped (the test failed while it was down)
        finally:
            shutil.rmtree(self._base, ignore_errors=True)
