"""``planner calibrate``: fit a performance profile to your own measured runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import fail, print_json

Opt = typer.Option


def register(cli: typer.Typer) -> None:
    cli.command("calibrate")(calibrate)


FLAGS = {
    "csv": "--measurements",
    "rows": "--measurements",
    "logs": "--log",
    "gpu": "--gpu-type",
    "gpus_per_node": "--gpus-per-node",
    "group_by": "--group-by",
}


def _flag(field: str | None) -> str:
    return FLAGS.get((field or "rows").split(".")[0], field or "--measurements")


def _read(path: Path, flag: str) -> dict[str, str]:
    field = flag.removeprefix("--")
    # a log may carry a stray byte (a progress bar, a terminal escape): decoded leniently
    errors = "strict" if flag == "--measurements" else "replace"
    try:
        text = path.read_bytes().decode("utf-8", errors=errors)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}", field=field)
    except UnicodeDecodeError as exc:
        fail(f"{path} is not UTF-8 text (byte {exc.start}); give a CSV file", field=field)
    lines = [line for line in text.splitlines() if line.strip()]
    csv_file = flag == "--measurements" and path.suffix.lower() != ".json"
    if csv_file and len(lines) < 2:  # said per file, not "no rows" for all
        fail(
            f"{path} has no measurement rows: give a CSV with a header line (the columns of "
            "shared/data/measured-throughput.csv) and one line per measured run",
            field=field,
        )
    return {"name": path.stem, "text": text}


def _read_json_rows(path: Path) -> list[object]:
    """A ``--measurements`` file ending in .json: a list of rows or ``{"rows": [...]}``, the
    API's JSON body; its rows get the CSV header's column check (app.calibration.request)."""
    text = _read(path, "--measurements")["text"]
    try:
        data = json.loads(text)
    except ValueError as exc:
        fail(f"{path} is not JSON: {exc}", field="measurements")
    rows = data.get("rows") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        fail(f'{path}: give a JSON list of rows or {{"rows": [...]}}', field="measurements")
    return rows


def read_measurement_rows(
    paths: list[Path],
    logs: list[Path],
    gpu_type: str | None,
    gpus_per_node: int | None,
    group_by: str = "sweep",
) -> list[dict[str, str]]:
    """Rows with the shared CSV's columns, from CSV files and Megatron-LM logs, through the one
    calibrate request (:mod:`app.calibration.request`) the API and the web page read too."""
    from app.calibration.request import measurement_rows, parse
    from planner.specs import SpecError

    if not paths and not logs:  # --suggest may start from no measurement at all
        return []
    json_paths = [p for p in paths if p.suffix.lower() == ".json"]
    data = {
        "rows": [row for p in json_paths for row in _read_json_rows(p)],
        "csv": [_read(p, "--measurements") for p in paths if p not in json_paths],
        "logs": [_read(p, "--log") for p in logs],
        "gpu": gpu_type,
        "gpus_per_node": gpus_per_node,
        "group_by": group_by,
    }
    try:
        return measurement_rows(parse(data, label=_flag)).rows
    except SpecError as exc:
        fail(exc.message, field=_flag(exc.field).removeprefix("--").replace("-", "_"))


def calibrate(
    measurements: Annotated[
        list[Path] | None,
        Opt(
            help="CSV with the columns of shared/data/measured-throughput.csv (or a .json file "
            "of rows with those keys, as the API takes)."
        ),
    ] = None,
    log: Annotated[list[Path] | None, Opt(help="A Megatron-LM training log (repeatable).")] = None,
    gpu_type: Annotated[str | None, Opt(help="GPU of the logged runs, e.g. h100-sxm-80gb.")] = None,
    gpus_per_node: Annotated[int | None, Opt(help="GPUs per node of the logged runs.")] = None,
    group_by: Annotated[str, Opt(help="Cross-validation groups: source or sweep.")] = "sweep",
    output: Annotated[Path | None, Opt(help="Write the fitted profile(s) here (JSON).")] = None,
    json_output: Annotated[bool, Opt("--json", help="Print the report as JSON.")] = False,
    show_skipped: Annotated[
        bool, Opt("--show-skipped", help="List the rows that could not be used, with reasons.")
    ] = False,
    suggest: Annotated[
        int | None,
        Opt(
            min=1,
            max=20,
            help="Propose this many short runs that would pin down --request's "
            "prediction (rows given with --measurements/--log count as measured).",
        ),
    ] = None,
    request: Annotated[
        Path | None,
        Opt(help='With --suggest: a JSON evaluation request (a layout), or {"plan": {...}}.'),
    ] = None,
    max_nodes: Annotated[
        int | None,
        Opt(min=1, help="With --suggest: the most nodes one run may use (default: the cluster's)."),
    ] = None,
) -> None:
    """Fit the throughput model's coefficients to measured runs; report cross-validated error."""
    from app.calibration.fit import calibrate_rows
    from planner.specs import SpecError

    if suggest is not None:
        from app.cli.calibrate_suggest import run_suggest

        rows = read_measurement_rows(measurements or [], log or [], gpu_type, gpus_per_node)
        run_suggest(suggest, request, rows, json_output, max_nodes=max_nodes)
        return
    if max_nodes is not None:
        fail("--max-nodes is a budget for --suggest's runs: add --suggest K", field="max_nodes")
    if not measurements and not log:
        fail("give --measurements FILE.csv and/or --log FILE", field="measurements")
    if output is not None and not output.expanduser().resolve().parent.is_dir():
        fail(f"cannot write {output}: its folder does not exist", field="output")
    rows = read_measurement_rows(measurements or [], log or [], gpu_type, gpus_per_node, group_by)
    from app.cli.calibrate_view import calibration_progress, print_report

    try:
        with calibration_progress() as progress:
            report = calibrate_rows(rows, group_by=group_by, progress=progress)
    except SpecError as exc:
        fail(exc.message, field=exc.field)
    if output is not None:
        try:
            output.write_text(json.dumps(report["profiles"], indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {output}: {exc.strerror}", field="output")
    if json_output:
        print_json(report)
        return
    print_report(report, output, show_skipped=show_skipped)
