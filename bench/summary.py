"""Rewrite the README's benchmark section from the committed results in ``bench/results/``.

Every figure in that section is read from a results file written by a benchmark in this
folder, so the README never quotes a number no benchmark produced. Run after the benchmarks:
``python -m bench.summary``. Missing results files are listed as "not run".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.five_runs_report import readme_lines as five_runs_readme_lines

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"
START, END = "<!-- BENCHMARKS -->", "<!-- /BENCHMARKS -->"


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _accuracy(lines: list[str]) -> None:
    acc = _load("accuracy")
    if acc is None:
        lines.append("* Throughput accuracy: not run (`python -m bench.accuracy`).")
        return
    lines += [
        f"**Throughput accuracy** (`bench/results/accuracy.md`): {acc['rows_used']} usable rows "
        "of the shared measurements, absolute percentage error of tokens/s per GPU, each group "
        "predicted by profiles fitted without it.",
        "",
        "| cross-validation | median before fit | p90 before | median after fit | p90 after | "
        "sweeps whose rows differ by >= 3 % with the measured best in our top 3 |",
        "|---|---|---|---|---|---|",
    ]
    for key, label in (
        ("cv_by_source", "leave one source out"),
        ("cv_by_sweep", "leave one sweep out"),
        ("cv_by_gpu", "leave one GPU type out"),
        ("cv_by_family", "leave one model family out"),
    ):
        cv = acc[key]
        before, after = cv["before"], cv["after"]
        clean = [w for w in cv["sweeps"] if w["measured_spread"] >= 0.03]
        lines.append(
            f"| {label} | {_pct(before['median_ape'])} | {_pct(before['p90_ape'])} | "
            f"{_pct(after['median_ape'])} | {_pct(after['p90_ape'])} | "
            f"{sum(w['top3'] for w in clean)} of {len(clean)} (all {cv['sweeps_ranked']} "
            f"sweeps: {cv['sweeps_top3']}) |"
        )
    lines.append("")


def _published(lines: list[str]) -> None:
    pub = _load("published_check")
    if pub is None:
        lines.append("* Published check: not run (`python -m bench.published_check`).")
        return
    s = pub["summary"]
    series = s["series"]
    moe = series.get("moe_blackwell", {})
    readme = series.get("megatron_readme_h100_weak_scaling", {})
    over = s["over_hbm"]
    lines += [
        f"**Planner vs published runs it never fitted** (`bench/results/published_check.md`): "
        f"{s['cases']} published figures whose layouts are only partly stated (Megatron-LM "
        "README H100 tables, dgxc Nemotron-4 340B / GPT-3 175B, the Llama 3 paper's 405B runs, "
        "Megatron Core MoE and Megatron-Bridge figures for DeepSeek-V3 and Qwen3 on GB200/GB300, "
        "NVIDIA's DeepSeek-V3 GB200 write-up, Megatron-Bridge H100 MoE runs of Qwen3-30B-A3B, "
        "GPT-OSS-20B and DeepSeek-V3); the planner plans under what each source states, "
        "layout and software stack (`models_db/measurement_stacks.csv`), and its best predicted "
        f"value is compared with the published one: |error| median {_pct(s['median_ape'])}, "
        f"p90 {_pct(s['p90_ape'])} over the {s['headline_cases']} in the headline (out of it: "
        "figures recalled from outside our sheets and NVIDIA's unoptimised DeepSeek-V3 baseline"
        + (f"; {len(over)} whose stated layout our memory estimate puts over HBM" if over else "")
        + ")"
        + (
            f"; Megatron-LM README weak scaling median ratio {readme['median_ratio']:.3f}"
            if readme
            else ""
        )
        + (f"; MoE on Blackwell median ratio {moe['median_ratio']:.3f}" if moe else "")
        + (
            f"; MoE on H100 median ratio {series['moe_h100']['median_ratio']:.3f}"
            if "moe_h100" in series
            else ""
        )
        + (
            f"; all {s['moe']['rows']} MoE figures |error| median {_pct(s['moe']['median_ape'])}"
            if s.get("moe", {}).get("median_ape") is not None
            else ""
        )
        + ". Why the misses happen, per series: the page's *Reading*.",
        "",
    ]


def _memory(lines: list[str]) -> None:
    mem = _load("memory_accuracy")
    if mem is None:
        lines.append("* Memory accuracy: not run (`python -m bench.memory_accuracy`).")
        return
    s = mem["summary"]
    c = s["confusion"]
    lines += [
        f"**Memory** (`bench/results/memory_accuracy.md`, {s['rows']} BLOOM-176B pre-study rows "
        f"on A100-80GB): peak error median {s['median_abs_pct_error']:.1f} %, p90 "
        f"{s['p90_abs_pct_error']:.1f} %; out-of-memory runs called feasible: "
        f"**{c['oom_called_feasible']}** of "
        f"{c['oom_called_feasible'] + c['oom_called_infeasible']}; "
        f"runs that ran called infeasible: {c['ran_called_infeasible']} of "
        f"{c['ran_called_infeasible'] + c['ran_called_feasible']} (each of them measured at "
        f">= {s['min_measured_of_ran_called_infeasible_gib']:.0f} GiB, above the 80 % line).",
        "",
    ]
    recipes = _load("memory_recipes")
    if recipes is not None:
        r = recipes["summary"]
        lines += [
            f"**Memory, NVIDIA recipes** (`bench/results/memory_recipes.md`): of "
            f"{r['recipes']} dgxc recipes that ran, {r['recipes_within_hbm']} fit in HBM and "
            f"{r['recipes_within_80']} under the 80 % line; DeepSeek-V3's shipped H100 layouts "
            f"with their settings: {r['shipped_within_80']} of 2 under the 80 % line; "
            f"{r['peaks']} published peaks: |error| median {100 * r['peak_error_median']:.0f} %.",
            "",
        ]


def _speed(lines: list[str]) -> None:
    search, cli, api = _load("search"), _load("cli_speed"), _load("api_load")
    lines += ["**Speed** (2-core machine, medians of one run):", ""]
    if cli is not None:
        ev, pl = cli["evaluate_1000_layouts"], cli["plan_llama3.1_70b_1024_h100"]
        lines.append(
            f"* `planner evaluate --input` with 1 000 layouts: {ev['median_s']} s "
            "(target < 2 s), start-up included."
        )
        lines.append(
            f"* `planner plan` Llama-3.1-70B on 1 024 H100: {pl['median_s']} s "
            "(target < 3 s), start-up included."
        )
    if search is not None:
        s = search["summary"]
        lines.append(
            f"* Search (`bench/results/search.md`, {s['cases']} cases, 8 to 16 384 GPUs): "
            "default search within 2 % of the exhaustive optimum in "
            f"{_pct(s['default_within_2pct_share'])} of cases; forced sampled (TPE) search "
            "within 2 % in "
            f"{_pct(s['forced_tpe_within_2pct_share'])} of {s['forced_tpe_runs']} runs; "
            f"single search median {s['single_median_wall_s'] * 1000:.0f} ms, GPU-count and "
            f"batch ranges up to {s['range_max_wall_s']:.1f} s."
        )
    if api is not None:
        lines.append(
            "* `POST /v1/evaluations` capacity (rate limiter off; "
            f"{api['connections']} connections, "
            f"{api['duration_s']} s, wrk; the 2 cores are shared with other jobs, so the tail "
            f"is noisy): {api['requests_per_s']:.0f} requests/s, p50 "
            f"{api['p50_ms']:.0f} ms, p99 {api['p99_ms']:.0f} ms, {api['non_2xx']} errors; "
            f"one request alone {api['single_request_median_ms']:.1f} ms (median, kept-alive "
            "connection)."
        )
    bulk = _load("bulk_eval")
    if bulk is not None:
        runs = ", ".join(
            f"{r['layouts']:,} layouts {r['layouts_per_s']:,} layouts/s" for r in bulk["runs"]
        )
        lines.append(
            "* `POST /v1/evaluations/bulk` (`bench/results/bulk_eval.md`, one job, one "
            f"vectorised batch, JSON lines back; medians of 5 requests): {runs} "
            f"(target >= {bulk['target_layouts_per_s']:,.0f})."
        )
    mixed = _load("load_mixed")
    if mixed is not None:
        lines.append(
            f"* Mixed load (`bench/results/load_mixed.md`: evaluations, plan jobs and catalog "
            f"reads with API keys, {mixed['connections']} connections, "
            f"{mixed['duration_s']:.0f} s, wrk): {mixed['requests_per_s']:.0f} requests/s, "
            f"**p50 {mixed['p50_ms']:.0f} ms, p99 {mixed['p99_ms']:.0f} ms**, "
            f"{mixed['errors']} errors."
        )
    workers = _load("worker_throughput")
    if workers is not None:
        single = {
            r["mode"]: r["plans_per_minute"]
            for r in workers["results"]
            if r["workload"] == "single"
        }
        text = "; ".join(f"{mode}: {rate:.0f}" for mode, rate in single.items())
        lines.append(
            f"* Plans per minute (`bench/results/worker_throughput.md`, Llama-3.1-70B "
            f"on 256 H100, 2 cores): {text}."
        )
    lines.append("")


def render() -> str:
    lines: list[str] = [START, ""]
    _accuracy(lines)
    _published(lines)
    lines += five_runs_readme_lines()  # issue 12 scoreboard (bench/five_runs_report.py)
    _memory(lines)
    _speed(lines)
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    text = README.read_text()
    if START not in text:
        raise SystemExit(f"README.md has no {START} marker")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1] if END in rest else ""
    README.write_text(head + render() + tail)
    print(render())


if __name__ == "__main__":
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.summary",
        __doc__,
        writes="README.md (the section between the BENCHMARKS markers)",
        runtime="under a minute (it reads the committed results only)",
    )
    parser.parse_args()
    main()
