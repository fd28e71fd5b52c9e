"""Wall time of the CLI as a user runs it (start-up included).

* ``planner evaluate --input`` with 1 000 layouts of mixed models (issue 2: < 2 s);
* ``planner plan`` for Llama-3.1-70B on 1 024 H100 (issue 3: < 3 s).

Each command runs ``--repeat`` times; the median and the spread are written to
``bench/results/cli_speed.json`` and ``.md``. Run: ``python -m bench.cli_speed``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PLANNER = [sys.executable, "-m", "app.cli"]
PLAN_70B = ["plan", "--model", "llama3.1-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "1024",
            "--gpus-per-node", "8", "--seq-length", "8192", "--global-batch-size", "1024",
            "--json"]  # fmt: skip


def layouts_file(path: Path, n: int = 1000) -> None:
    """n layout requests cycling over models, GPU counts and every axis."""
    models = [("llama3.1-8b", 8), ("llama3.1-70b", 64), ("mixtral-8x7b", 64), ("qwen3-30b-a3b", 32)]
    axes = itertools.product([1, 2, 4, 8], [1, 2, 4], [1, 2], ["none", "selective", "full"], [1, 2])
    lines = []
    for i, (tp, pp, cp, recompute, mbs) in zip(range(n), itertools.cycle(axes), strict=False):
        model, gpus = models[i % len(models)]
        lines.append(
            json.dumps(
                {
                    "model": model,
                    "gpu": "h100-sxm-80gb",
                    "num_gpus": gpus,
                    "seq_length": 8192,
                    "global_batch_size": 256,
                    "tp": tp,
                    "pp": pp,
                    "cp": cp,
                    "recompute": recompute,
                    "micro_batch_size": mbs,
                    "ep": 8 if model.startswith(("mixtral", "qwen3")) else 1,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")


def timed(args: list[str], repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([*PLANNER, *args], cwd=ROOT, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(args)} failed: {done.stderr.decode()[-500:]}")
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "runs": repeat,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "layouts.jsonl"
        layouts_file(path)
        evaluate = timed(["evaluate", "--input", str(path), "--json"], ns.repeat)
    plan = timed(PLAN_70B, ns.repeat)
    startup = timed(["--help"], ns.repeat)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, python {platform.python_version()}",
        "evaluate_1000_layouts": evaluate,
        "plan_llama3.1_70b_1024_h100": plan,
        "cli_start_help": startup,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cli_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    md = [
        "# CLI speed (start-up included)",
        "",
        f"{result['date']}, {result['machine']}; median of {ns.repeat} runs in one session.",
        "",
        "| command | median s | min s | max s | target |",
        "|---|---|---|---|---|",
        f"| `planner evaluate --input` 1 000 layouts | {evaluate['median_s']} | "
        f"{evaluate['min_s']} | {evaluate['max_s']} | < 2 s |",
        f"| `planner plan` Llama-3.1-70B, 1 024 H100 | {plan['median_s']} | {plan['min_s']} | "
        f"{plan['max_s']} | < 3 s |",
        f"| `planner --help` (start-up alone) | {startup['median_s']} | {startup['min_s']} | "
        f"{startup['max_s']} | |",
        "",
    ]
    (RESULTS / "cli_speed.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
