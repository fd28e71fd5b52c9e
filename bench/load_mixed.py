"""Mixed load test with wrk: evaluations, plan-job submissions and catalog reads, with API keys.

Starts ``planner serve`` (production mode: ``PLANNER_AUTH=api-key``) on a free port with a
throw-away SQLite database and a quick fake job runner (so the queued plan jobs do not compete
with the API for the 2 CPUs), creates a ``plan`` key with ``planner keys create``, and drives it
with wrk (a Lua script picks each request: 50 % ``POST /v1/evaluations`` with the real planner,
20 % ``POST /v1/plan-jobs``, 30 % catalog GETs). Writes ``bench/results/load_mixed.{json,md}``
with requests/s, p50/p90/p99 latency and the error counts (non-2xx answers and socket errors).

    .venv/bin/python bench/load_mixed.py [--duration 60] [--connections 64] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
LAUNCH = ROOT / "tests" / "support" / "launch.py"  # the service with the fake runner
PLANNER = str(Path(sys.executable).with_name("planner"))
FAKE_RUNNER = """
def plan_request(request, *, profile=None, progress=None):
    if progress is not None:
        progress(1, 1)
    return {"plans": [], "search": {"evaluated": 1}}
"""
LUA = r"""
local key = os.getenv("PLANNER_LOAD_KEY")
local evaluation = '{"model":"llama3.1-70b","gpu":"h100-sxm-80gb","num_gpus":64,' ..
  '"gpus_per_node":8,"seq_length":8192,"global_batch_size":128,"tp":8,"pp":4,"vpp":5,' ..
  '"micro_batch_size":1,"recompute":"selective"}'
local reads = {"/v1/models", "/v1/gpus", "/v1/clusters", "/v1/models/llama3.1-70b"}
local threads = {}
local counter = 0

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
  math.randomseed(os.time() + #threads)
end

function request()
  counter = counter + 1
  local r = math.random(100)
  local headers = {["X-API-Key"] = key, ["Content-Type"] = "application/json"}
  if r <= 50 then
    return wrk.format("POST", "/v1/evaluations", headers, evaluation)
  elseif r <= 70 then
    local body = '{"model":"llama3.1-70b","gpu":"h100-sxm-80gb","num_gpus":64,' ..
      '"seq_length":8192,"global_batch_size":128,"seed":' .. (counter % 1000) .. '}'
    return wrk.format("POST", "/v1/plan-jobs", headers, body)
  else
    return wrk.format("GET", reads[math.random(#reads)], {["X-API-Key"] = key})
  end
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local counts = {}
  for _, thread in ipairs(threads) do
    local s = thread:get("statuses")
    for code, n in pairs(s) do
      counts[code] = (counts[code] or 0) + n
    end
  end
  local parts = {}
  for code, n in pairs(counts) do
    table.insert(parts, string.format('"%d":%d', code, n))
  end
  io.write(string.format(
    'RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"mean_us":%.1f,"errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d,' ..
    '"status":%d},"statuses":{%s}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, summary.errors.connect,
    summary.errors.read, summary.errors.write, summary.errors.timeout, summary.errors.status,
    table.concat(parts, ",")))
end
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_load(duration_s: int, connections: int, threads: int) -> dict[str, Any]:
    """Start a server, drive it with wrk, stop it; the summary (latencies in ms)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk is not installed (apt-get install wrk)")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "load_runner.py").write_text(FAKE_RUNNER)
        Path(tmp, "mixed.lua").write_text(LUA)
        env = {
            **os.environ,
            "PYTHONPATH": f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "PLANNER_DATABASE_URL": f"sqlite:///{tmp}/planner.db",
            "PLANNER_ENV": "production",
            "PLANNER_AUTH": "api-key",
            "PLANNER_SECRET_KEY": "Zq3v9Lr2Wm8Kx1Tb7Nc4Hd6Pf0Gj5Ys-RuAeIoQ-load",
            "PLANNER_RATE_LIMIT_PER_S": "0",
            "PLANNER_RATE_LIMIT_IP_PER_S": "0",
            "PLANNER_WORKERS": "1",
            "PLANNER_LOG_LEVEL": "warning",
        }
        created = subprocess.run(
            [PLANNER, "keys", "create", "--scopes", "plan", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        key = json.loads(created.stdout)["key"]
        port = free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "support" / "launch.py"),
                "serve",
                "load_runner:plan_request",
                str(port),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("planner serve did not become ready")
                time.sleep(0.2)
            out = subprocess.run(
                [
                    wrk,
                    f"-t{threads}",
                    f"-c{connections}",
                    f"-d{duration_s}s",
                    "--timeout",
                    "10s",
                    "-s",
                    f"{tmp}/mixed.lua",
                    f"http://127.0.0.1:{port}",
                ],
                env={**env, "PLANNER_LOAD_KEY": key},
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        finally:
            server.terminate()
            server.wait(30)
    match = re.search(r"^RESULT (.*)$", out, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no result from wrk:\n{out}")
    raw = json.loads(match.group(1))
    statuses = {int(k): v for k, v in raw["statuses"].items()}
    non_2xx = sum(n for code, n in statuses.items() if not 200 <= code < 300)
    socket_errors = sum(v for k, v in raw["errors"].items() if k != "status")
    return {
        "duration_s": raw["duration_us"] / 1e6,
        "connections": connections,
        "threads": threads,
        "requests": raw["requests"],
        "requests_per_s": raw["requests"] / (raw["duration_us"] / 1e6),
        "p50_ms": raw["p50_us"] / 1000,
        "p90_ms": raw["p90_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
        "max_ms": raw["max_us"] / 1000,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "errors": non_2xx + socket_errors,
        "socket_errors": raw["errors"],
        "mix": {"POST /v1/evaluations": 0.5, "POST /v1/plan-jobs": 0.2, "GET catalog": 0.3},
    }


def write_results(result: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {**result, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"}
    (RESULTS / "load_mixed.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Mixed API load (wrk)",
        "",
        f"`planner serve` (1 process, production mode with API keys, SQLite) on "
        f"{result['machine']}; wrk {result['threads']} threads, {result['connections']} "
        f"connections, {result['duration_s']:.0f} s. Mix: 50 % POST /v1/evaluations (real "
        "planner), 20 % POST /v1/plan-jobs (queued; a fake quick runner), 30 % catalog GETs.",
        "",
        "| requests | req/s | p50 ms | p90 ms | p99 ms | max ms | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {result['requests']} | {result['requests_per_s']:.0f} | {result['p50_ms']:.1f} | "
        f"{result['p90_ms']:.1f} | {result['p99_ms']:.1f} | {result['max_ms']:.1f} | "
        f"{result['errors']} |",
        "",
        f"Status codes: {result['statuses']}; socket errors: {result['socket_errors']}.",
        "",
    ]
    (RESULTS / "load_mixed.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    result = run_load(args.duration, args.connections, args.threads)
    write_results(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
