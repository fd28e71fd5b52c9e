"""Throughput of ``POST /v1/evaluations/bulk``: layouts evaluated per second, end to end.

Starts ``planner serve`` (one uvicorn worker, throw-away SQLite, rate limits off) and posts one
job with N layouts (a mix of tp/pp/vpp/cp/micro-batch/recompute, valid and invalid), timing each
request from send to the last streamed line; repeats and reports the median. Writes
``bench/results/bulk_eval.json`` and ``.md``.

    .venv/bin/python bench/bulk_eval.py [--sizes 1000 20000 100000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.api_load import BODY, free_port, start_server  # noqa: E402

RESULTS = ROOT / "bench" / "results"
LAYOUT_FIELDS = ("tp", "pp", "vpp", "micro_batch_size", "recompute")
JOB = {k: v for k, v in BODY.items() if k not in LAYOUT_FIELDS}  # api_load's job, no layout
TARGET_LAYOUTS_PER_S = 20_000.0


def layouts(n: int) -> list[dict[str, object]]:
    grid = itertools.cycle(
        itertools.product((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 5), (1, 2), (1, 2), RECOMPUTE)
    )
    return [
        {"tp": tp, "pp": pp, "vpp": vpp, "cp": cp, "micro_batch_size": mbs, "recompute": rc}
        for tp, pp, vpp, cp, mbs, rc in itertools.islice(grid, n)
    ]


RECOMPUTE = ("none", "selective", "full")


def run(base: str, n: int, repeats: int) -> dict[str, object]:
    body = json.dumps({**JOB, "layouts": layouts(n)}).encode()
    times: list[float] = []
    lines = 0
    with httpx.Client(base_url=base, timeout=120) as client:
        for _ in range(repeats + 1):  # the first run warms the process up; not counted
            start = time.perf_counter()
            with client.stream(
                "POST",
                "/v1/evaluations/bulk",
                content=body,
                headers={"content-type": "application/json"},
            ) as response:
                response.raise_for_status()
                lines = sum(1 for line in response.iter_lines() if line)
            times.append(time.perf_counter() - start)
    counted = times[1:]
    median = statistics.median(counted)
    return {
        "layouts": n,
        "lines": lines,
        "body_bytes": len(body),
        "seconds": [round(t, 4) for t in counted],
        "median_s": round(median, 4),
        "layouts_per_s": round(n / median),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 20_000, 100_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        os.environ["PLANNER_RATE_LIMIT_IP_PER_S"] = "0"
        proc = start_server(port, 1, data_dir)
        try:
            rows = [run(f"http://127.0.0.1:{port}", n, args.repeats) for n in args.sizes]
        finally:
            proc.terminate()
            proc.wait(30)
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    best = max(int(r["layouts_per_s"]) for r in rows if int(r["layouts"]) >= 20_000)
    out = {"machine": machine, "target_layouts_per_s": TARGET_LAYOUTS_PER_S, "runs": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bulk_eval.json").write_text(json.dumps(out, indent=2) + "\n")
    md = [
        "# Bulk evaluation: POST /v1/evaluations/bulk",
        "",
        f"planner serve (uvicorn, 1 worker), SQLite, on {machine}; the machine is shared with "
        "other jobs, so the numbers are noisy: each is the median of "
        f"{args.repeats} requests after one warm-up. Time is from sending the request to the "
        "last streamed JSON line.",
        "",
        "| layouts | body KiB | median s | layouts/s | runs (s) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        runs = ", ".join(f"{t:.3f}" for t in r["seconds"])  # type: ignore[attr-defined]
        md.append(
            f"| {r['layouts']} | {int(r['body_bytes']) // 1024} | {r['median_s']} | "  # type: ignore[call-overload]
            f"{r['layouts_per_s']} | {runs} |"
        )
    verdict = "met" if best >= TARGET_LAYOUTS_PER_S else "NOT met"
    md += ["", f"Target: >= {TARGET_LAYOUTS_PER_S:,.0f} layouts/s at >= 20 000 layouts: {verdict}."]
    (RESULTS / "bulk_eval.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
