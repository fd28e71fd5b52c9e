"""Wall time of the CLI as a user runs it (start-up included), each command a fresh process.

* ``planner evaluate --input`` with 1 000 layouts of mixed models (issue 2: < 2 s);
* ``planner plan`` for Llama-3.1-70B on 1 024 H100 (issue 3: < 3 s);
* start-up alone: ``planner --help`` (target < 0.3 s), ``planner plan --help`` and, as the
  floor no CLI can beat, ``python -c pass``.

Each command runs ``--repeat`` times through the installed ``planner`` script (what a user
types), timed from spawn to exit: the wall time
a user waits, and the CPU seconds the process used (user + system, from ``getrusage``), which
a busy machine inflates far less than the wall time. The processes may write bytecode
(``PYTHONDONTWRITEBYTECODE`` is dropped from their environment) and one untimed run of each
command comes first: a user's pip install compiles its packages and the first run of the
project writes its own, while a process that compiles everything on every start measures the
compiler (3 s for ``--help`` here). ``--baseline DIR`` times the start-up of
another checkout (``git archive main | tar -x -C DIR``) interleaved with this one, so that a
before/after pair shares the machine's load. Medians and spreads go to
``bench/results/cli_speed.json`` and ``.md``. Run: ``python -m bench.cli_speed``.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.cli import bench_parser

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SCRIPT = Path(sys.executable).with_name("planner")
PLAN_70B = ["plan", "--model", "llama3.1-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "1024",
            "--gpus-per-node", "8", "--seq-length", "8192", "--global-batch-size", "1024",
            "--json"]  # fmt: skip
STARTUP = {"help": ["--help"], "plan_help": ["plan", "--help"]}
HELP_TARGET_S = 0.3
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def planner_command(root: Path) -> list[str]:
    """This checkout's ``planner`` script; for another checkout (run in its folder, so that
    its packages come first on sys.path) what the script runs."""
    if root == ROOT and SCRIPT.exists():
        return [str(SCRIPT)]
    return [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]


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


def run_once(command: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one process from spawn to exit; exit 0/1 expected (1: infeasible)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, check=False, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def summary(samples: list[tuple[float, float]]) -> dict[str, float]:
    walls, cpus = [w for w, _ in samples], [c for _, c in samples]
    return {
        "median_s": round(statistics.median(walls), 3),
        "min_s": round(min(walls), 3),
        "max_s": round(max(walls), 3),
        "cpu_median_s": round(statistics.median(cpus), 3),
        "runs": len(samples),
    }


def timed(args: list[str], repeat: int, root: Path = ROOT) -> dict[str, float]:
    command = [*planner_command(root), *args]
    run_once(command, root)  # untimed: writes the bytecode a user's second run finds
    return summary([run_once(command, root) for _ in range(repeat)])


def startup(repeat: int, baseline: Path | None) -> dict[str, dict[str, dict[str, float]]]:
    """Start-up cases, this checkout and the baseline interleaved run by run (same load)."""
    roots = {"this": ROOT, **({"baseline": baseline} if baseline else {})}
    cases = {**STARTUP, "python_floor": None}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(repeat + 1):  # the first round is untimed: it writes the bytecode
        for (case, args), (label, root) in itertools.product(cases.items(), roots.items()):
            if args is None and label != "this":
                continue  # the interpreter's floor is the same for both
            command = [sys.executable, "-c", "pass"] if args is None else planner_command(root)
            samples.setdefault((label, case), []).append(run_once([*command, *(args or [])], root))
    samples = {key: runs[1:] for key, runs in samples.items()}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (label, case), runs in samples.items():
        out.setdefault(label, {})[case] = summary(runs)
    return out


def markdown(result: dict, repeat: int) -> str:  # type: ignore[type-arg]
    evaluate, plan = result["evaluate_1000_layouts"], result["plan_llama3.1_70b_1024_h100"]
    start, base = result["startup"]["this"], result["startup"].get("baseline", {})
    md = [
        "# CLI speed (start-up included)",
        "",
        f"{result['date']}, {result['machine']}, load average {result['load_average_1min']} at "
        f"the start; median of {repeat} runs in one session, each a fresh process. Wall s is "
        "what a user waits (a busy machine stretches it); CPU s is user + system time of the "
        "process.",
        "",
        "| command | median s | min s | max s | CPU s | target |",
        "|---|---|---|---|---|---|",
    ]
    rows = [
        ("`planner evaluate --input` 1 000 layouts", evaluate, "< 2 s"),
        ("`planner plan` Llama-3.1-70B, 1 024 H100", plan, "< 3 s"),
        ("`planner --help` (start-up alone)", start["help"], f"< {HELP_TARGET_S} s"),
        ("`planner plan --help`", start["plan_help"], ""),
        ("`python -c pass` (the interpreter's floor)", start["python_floor"], ""),
    ]
    rows += [(f"baseline `{c.replace('_', ' ')}`", base[c], "") for c in base]
    for name, row, target in rows:
        md.append(f"| {name} | {row['median_s']} | {row['min_s']} | {row['max_s']} | "
                  f"{row['cpu_median_s']} | {target} |")  # fmt: skip
    if result.get("baseline"):
        md += ["", f"Baseline: `{result['baseline']}`, timed interleaved with this checkout."]
    return "\n".join([*md, ""])


def main() -> None:
    parser = bench_parser(
        "bench.cli_speed",
        __doc__,
        writes="bench/results/cli_speed.json and .md",
        runtime="about a minute (five runs of each command)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout to time start-up against")
    ns = parser.parse_args()
    result: dict = {  # type: ignore[type-arg]
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, python {platform.python_version()}",
        "load_average_1min": round(os.getloadavg()[0], 2),  # other work on the 2 shared cores
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "layouts.jsonl"
        layouts_file(path)
        result["evaluate_1000_layouts"] = timed(["evaluate", "--input", str(path), "--json"],
                                                ns.repeat)  # fmt: skip
    result["plan_llama3.1_70b_1024_h100"] = timed(PLAN_70B, ns.repeat)
    result["startup"] = startup(ns.repeat, ns.baseline)
    result["cli_start_help"] = result["startup"]["this"]["help"]  # the key bench/summary.py reads
    if ns.baseline:
        result["baseline"] = str(ns.baseline)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cli_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result, ns.repeat)
    (RESULTS / "cli_speed.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
