"""Ablation of the issue-12 mechanisms wired into the step time: every CV fold per variant.

Run ``python -m bench.fidelity VARIANT=path/to/accuracy.json ...``: each argument names one
``bench.accuracy`` result (the committed one of a commit, or a run with a mechanism switched off)
and the script writes ``bench/results/fidelity.md`` / ``fidelity.json`` with, per variant and CV
fold, the median and p90 APE of tokens/s per GPU after fitting, the clean sweeps whose measured
best is in the model's top 3, the median Spearman inside sweeps, and the MoE rows' median APE.
The variants are produced by ``bench.accuracy`` itself; this script only tabulates them.

The hand-written reading of the variants (``bench/fidelity_reading.md``) follows the tables, with
the calibration's shipped noise read from the code (:mod:`bench.noise_text`);
``python -m bench.fidelity --keep`` alone rewrites the page from ``fidelity.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.noise_text import fill

RESULTS = Path(__file__).parent / "results"
READING = Path(__file__).parent / "fidelity_reading.md"
FOLDS = ("source", "sweep", "gpu", "family", "stack", "cluster")


def summarise(data: dict[str, Any]) -> dict[str, Any]:
    """The per-fold numbers of one accuracy.json."""
    out: dict[str, Any] = {"commit": data.get("commit", "")}
    for fold in FOLDS:
        cv = data[f"cv_by_{fold}"]
        moe = cv.get("dense_vs_moe", {}).get("moe_after", {})
        out[fold] = {
            "median_ape": cv["after"]["median_ape"],
            "p90_ape": cv["after"]["p90_ape"],
            "before_median_ape": cv["before"]["median_ape"],
            "before_p90_ape": cv["before"]["p90_ape"],
            "top3": cv["sweeps_top3"],
            "ranked": cv["sweeps_ranked"],
            "median_spearman": cv["median_spearman"],
            "moe_median_ape": moe.get("median_ape"),
        }
    sweeps = data["cv_by_sweep"]["sweeps"]
    out["spearman_by_sweep"] = {s["sweep_id"]: s["spearman"] for s in sweeps}
    return out


def markdown(variants: dict[str, dict[str, Any]]) -> str:
    lines = [
        "# Fidelity ablation (issue 12): the mechanisms in the step time, fold by fold",
        "",
        "Each row is one `bench.accuracy` run (profiles refitted by the same fit code for every "
        "fold). APE = absolute percentage error of tokens/s per GPU after fitting without the "
        "held-out group; top-3 = clean sweeps whose measured best is in the model's top 3; "
        "rho = median Spearman inside sweeps; MoE = median APE of the 18 Grok-1 rows. "
        "*prior* = the architecture priors before any fit (same for every fold).",
        "",
        "| variant | prior median / p90 | "
        + " | ".join(f"{f}-out median / p90" for f in FOLDS)
        + " | top-3 (sweep-out) | rho (sweep-out) | MoE median (source-out) |",
        "|---|---|" + "---|" * len(FOLDS) + "---|---|---|",
    ]
    for name, v in variants.items():
        cells = [f"{100 * v[f]['median_ape']:.1f} / {100 * v[f]['p90_ape']:.1f} %" for f in FOLDS]
        sweep, source = v["sweep"], v["source"]
        moe = source["moe_median_ape"]
        lines.append(
            f"| {name} | {100 * sweep['before_median_ape']:.1f} / "
            f"{100 * sweep['before_p90_ape']:.1f} % | "
            + " | ".join(cells)
            + f" | {sweep['top3']} of {sweep['ranked']} | {sweep['median_spearman']:.2f} | "
            + ("-" if moe is None else f"{100 * moe:.1f} %")
            + " |"
        )
    names = list(variants)
    sweep_ids = sorted({s for v in variants.values() for s in v["spearman_by_sweep"]})
    lines += [
        "",
        "## Spearman inside each sweep (leave-one-sweep-out)",
        "",
        "| sweep | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for sid in sweep_ids:
        vals = []
        for n in names:
            rho = variants[n]["spearman_by_sweep"].get(sid)
            vals.append("-" if rho is None or rho != rho else f"{rho:.2f}")
        lines.append(f"| {sid} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """``NAME=accuracy.json`` per variant, in order; ``--notes FILE`` appends a reading;
    ``--keep`` starts from the variants already in ``fidelity.json`` (their accuracy.json files
    are those of earlier commits) and appends the new ones."""
    notes = ""
    variants: dict[str, dict[str, Any]] = {}
    if "--keep" in argv:
        argv = [a for a in argv if a != "--keep"]
        variants = json.loads((RESULTS / "fidelity.json").read_text(encoding="utf-8"))
    if "--notes" in argv:
        i = argv.index("--notes")
        notes = Path(argv[i + 1]).read_text(encoding="utf-8")
        argv = argv[:i] + argv[i + 2 :]
    if not argv and not variants:
        print("usage: python -m bench.fidelity NAME=accuracy.json [...] [--keep] [--notes FILE]")
        return 2
    for arg in argv:
        name, _, path = arg.partition("=")
        variants[name] = summarise(json.loads(Path(path).read_text(encoding="utf-8")))
    (RESULTS / "fidelity.json").write_text(json.dumps(variants, indent=1) + "\n")
    reading = "\n".join(fill(READING.read_text(encoding="utf-8").splitlines()))
    page = markdown(variants) + "\n" + reading + "\n" + ("\n" + notes if notes else "")
    (RESULTS / "fidelity.md").write_text(page)
    return 0


if __name__ == "__main__":
    from bench.cli import bench_parser

    parser = bench_parser(
        "bench.fidelity",
        __doc__,
        writes="bench/results/fidelity.{json,md}",
        runtime="a few seconds (it only tabulates accuracy.json files)",
    )
    parser.add_argument(
        "variants", nargs="*", metavar="NAME=accuracy.json", help="one bench.accuracy result"
    )
    parser.add_argument(
        "--keep", action="store_true", help="start from the variants already in fidelity.json"
    )
    parser.add_argument("--notes", metavar="FILE", help="append this reading to the page")
    args = parser.parse_args()
    if not args.variants and not args.keep:
        parser.error("give at least one NAME=accuracy.json, or --keep to rewrite the page")
    argv = [*args.variants, *(["--keep"] if args.keep else [])]
    raise SystemExit(main(argv + (["--notes", args.notes] if args.notes else [])))
