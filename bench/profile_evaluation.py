"""Where the time of one ``POST /v1/evaluations`` goes: the planner alone, the app in-process
(every middleware layer, routing, validation, serialisation; no socket), and a cProfile of the
latter.

    .venv/bin/python bench/profile_evaluation.py [--n 300] [--profile]

Prints the median wall time and the CPU time (all threads) per request, in milliseconds; with
``--profile`` also the costliest functions of the event-loop thread. On a shared machine the
CPU time is the steadier of the two. Run it before and after a change, back to back.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.api_load import BODY  # noqa: E402 - the load benchmark's request, the same body


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def planner_alone(n: int) -> tuple[float, float]:
    """``evaluate_request``: request parsing, conversion, the planner, the typed report.
    (median wall ms, CPU ms per request)."""
    from app.planning.compute import evaluate_request

    evaluate_request(BODY)
    times = []
    cpu = time.process_time()
    for _ in range(n):
        start = time.perf_counter()
        evaluate_request(BODY)
        times.append(time.perf_counter() - start)
    return _median_ms(times), (time.process_time() - cpu) / n * 1e3


async def _asgi_post(app: Any, body: bytes) -> int:
    """One request straight into the ASGI app (no socket, no HTTP parsing)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/evaluations",
        "raw_path": b"/v1/evaluations",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])

    await app(scope, receive, send)
    return status


def app_in_process(n: int, profile: bool) -> tuple[float, float]:
    from app.core.settings import Settings
    from app.main import create_app

    data_dir = tempfile.mkdtemp(prefix="planner-profile-")
    settings = Settings(
        data_dir=Path(data_dir),
        database_url=f"sqlite:///{data_dir}/planner.db",
        workers=0,
        rate_limit_per_s=0,
        rate_limit_ip_per_s=0,
    )
    os.environ.setdefault("PLANNER_LOG_LEVEL", "warning")
    app = create_app(settings)
    body = json.dumps(BODY).encode()

    async def run() -> tuple[list[float], float]:
        async with app.router.lifespan_context(app):
            for _ in range(20):  # warm-up: catalog cache, profile cache, imports
                assert await _asgi_post(app, body) == 200
            times = []
            cpu = time.process_time()  # every thread's CPU: the work, not the waiting
            profiler = cProfile.Profile() if profile else None
            for _ in range(n):
                start = time.perf_counter()
                if profiler:
                    profiler.enable()
                status = await _asgi_post(app, body)
                if profiler:
                    profiler.disable()
                times.append(time.perf_counter() - start)
                assert status == 200, status
            cpu_ms = (time.process_time() - cpu) / n * 1e3
            if profiler:
                stats = pstats.Stats(profiler).sort_stats("cumulative")
                stats.print_stats(25)
                stats.sort_stats("tottime").print_stats(15)
            return times, cpu_ms

    times, cpu_ms = asyncio.run(run())
    return _median_ms(times), cpu_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    import logging

    logging.disable(logging.INFO)  # the access log's formatting is not what we measure here
    alone, alone_cpu = planner_alone(args.n)
    whole, whole_cpu = app_in_process(args.n, args.profile)
    print(
        json.dumps(
            {
                "planner_alone_ms": round(alone, 3),
                "planner_alone_cpu_ms": round(alone_cpu, 3),
                "app_in_process_ms": round(whole, 3),
                "app_in_process_cpu_ms": round(whole_cpu, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
