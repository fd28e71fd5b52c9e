"""Start the service or a worker process with a fake plan runner (tests and benches only).

    python tests/support/launch.py serve MODULE:FUNCTION PORT
    python tests/support/launch.py worker MODULE:FUNCTION

The runner is injected as a parameter (``default_backend(plan=...)``); the service itself has
no setting that names code to import.
"""

from __future__ import annotations

import importlib
import logging
import sys

from app.core.settings import Settings
from app.planning.backend import default_backend


def main(argv: list[str]) -> None:
    kind, runner, *rest = argv
    module, _, name = runner.partition(":")
    backend = default_backend(plan=getattr(importlib.import_module(module), name))
    settings = Settings()
    if kind == "serve":
        import uvicorn

        from app.main import create_app, prepare_database

        prepare_database(settings)
        uvicorn.run(
            lambda: create_app(settings, backend=backend),
            factory=True,
            host="127.0.0.1",
            port=int(rest[0]),
            log_level="warning",
            log_config=None,
            access_log=False,
        )
    else:
        from app.cli.worker import run_worker

        logging.basicConfig(level=logging.WARNING)
        run_worker(settings, backend=backend)


if __name__ == "__main__":
    main(sys.argv[1:])
