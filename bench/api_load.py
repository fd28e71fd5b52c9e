"""Load benchmark of ``POST /v1/evaluations``: 16 concurrent clients for ~20 s with wrk.

Starts ``planner serve`` on a free port with a throw-away SQLite database, drives it with wrk
(Debian package ``wrk``; a Lua script sends the JSON body), and writes
``bench/results/api_load.json`` and ``.md`` with requests/s and p50/p99 latency. Falls back to
an httpx asyncio load generator only when wrk is not installed.

    .venv/bin/python bench/api_load.py [--workers 2] [--duration 20] [--connections 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BODY = {
    "model": "llama3.1-70b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 64,
    "gpus_per_node": 8,
    "seq_length": 8192,
    "global_batch_size": 128,
    "tp": 8,
    "pp": 4,
    "vpp": 5,
    "micro_batch_size": 1,
    "recompute": "selective",
}
TARGET_RPS = 200.0
TARGET_P99_MS = 100.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, workers: int, data_dir: str) -> subprocess.Popen[bytes]:
    # capacity, not the per-client limiter: one load generator is one client IP
    env = {
        **os.environ,
        "PLANNER_DATA_DIR": data_dir,
        "PLANNER_WORKERS": "0",
        "PLANNER_RATE_LIMIT_PER_S": "0",
        "PLANNER_RATE_LIMIT_IP_PER_S": "0",
    }
    planner = str(Path(sys.executable).with_name("planner"))
    proc = subprocess.Popen(
        [
            planner,
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    proc.kill()
    raise SystemExit("the server did not start")


def _ms(value: str, unit: str) -> float:
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]


def run_wrk(url: str, duration_s: int, connections: int, threads: int) -> dict[str, object]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write('wrk.method = "POST"\n')
        lua.write('wrk.headers["Content-Type"] = "application/json"\n')
        lua.write(f"wrk.body = [[{json.dumps(BODY)}]]\n")
    out = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{duration_s}s",
            "--latency",
            "-s",
            lua.name,
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    os.unlink(lua.name)
    lat = dict(re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+\w+)", out, re.M))
    parsed = {k: _ms(*re.fullmatch(r"([\d.]+)(\w+)", v).groups()) for k, v in lat.items()}  # type: ignore[union-attr]
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    total = re.search(r"(\d+) requests in", out)
    return {
        "tool": "wrk",
        "requests": int(total.group(1)) if total else None,
        "requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50_ms": parsed.get("50"),
        "p90_ms": parsed.get("90"),
        "p99_ms": parsed.get("99"),
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": errors.group(1) if errors else None,
        "raw": out,
    }


async def _httpx_load(url: str, duration_s: int, connections: int) -> dict[str, object]:
    latencies: list[float] = []
    failures = 0
    deadline = time.monotonic() + duration_s
    async with httpx.AsyncClient(timeout=30) as client:

        async def worker() -> None:
            nonlocal failures
            while time.monotonic() < deadline:
                start = time.perf_counter()
                r = await client.post(url, json=BODY)
                latencies.append((time.perf_counter() - start) * 1e3)
                failures += r.status_code >= 300

        start = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.monotonic() - start
    q = statistics.quantiles(latencies, n=100)
    return {
        "tool": "httpx-asyncio",
        "requests": len(latencies),
        "requests_per_s": len(latencies) / elapsed,
        "p50_ms": q[49],
        "p90_ms": q[89],
        "p99_ms": q[98],
        "non_2xx": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/evaluations"
    with tempfile.TemporaryDirectory() as data_dir:
        proc = start_server(port, args.workers, data_dir)
        try:
            single = []
            # warm-up, then the latency of one request alone on a kept-alive connection (a new
            # httpx client per request would time the client's own set-up, ~20 ms, instead)
            with httpx.Client(timeout=30) as client:
                for _ in range(60):
                    start = time.perf_counter()
                    r = client.post(url, json=BODY)
                    r.raise_for_status()
                    single.append((time.perf_counter() - start) * 1e3)
            if shutil.which("wrk"):
                result = run_wrk(url, args.duration, args.connections, args.threads)
            else:
                result = asyncio.run(_httpx_load(url, args.duration, args.connections))
        finally:
            proc.terminate()
            proc.wait(20)
    result.update(
        {
            "endpoint": "POST /v1/evaluations",
            "body": BODY,
            "server": f"planner serve (uvicorn) --workers {args.workers}, SQLite",
            "connections": args.connections,
            "duration_s": args.duration,
            "single_request_median_ms": statistics.median(single[10:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}",
            "target": {"requests_per_s": TARGET_RPS, "p99_ms": TARGET_P99_MS},
        }
    )
    result["meets_target"] = bool(
        result["non_2xx"] == 0
        and result["requests_per_s"] >= TARGET_RPS  # type: ignore[operator]
        and (result["p99_ms"] or 1e9) < TARGET_P99_MS  # type: ignore[operator]
    )
    raw = result.pop("raw", None)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "api_load.json").write_text(json.dumps(result, indent=2) + "\n")
    md = [
        "# API load: POST /v1/evaluations",
        "",
        f"{result['tool']}, {args.connections} concurrent connections, {args.duration} s, "
        f"{result['server']}, on {result['machine']}.",
        "",
        "| requests/s | p50 ms | p90 ms | p99 ms | non-2xx | one request alone, ms |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| {result['requests_per_s']:.1f} | {result['p50_ms']:.1f} | {result['p90_ms']:.1f} | "
        f"{result['p99_ms']:.1f} | {result['non_2xx']} | "
        f"{result['single_request_median_ms']:.1f} |",
        "",
        f"Target: >= {TARGET_RPS:.0f} req/s with p99 < {TARGET_P99_MS:.0f} ms: "
        f"{'met' if result['meets_target'] else 'NOT met'}.",
    ]
    if raw:
        md += ["", "```", raw.strip(), "```"]
    (RESULTS / "api_load.md").write_text("\n".join(md) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
