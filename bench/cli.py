"""The benchmarks' shared command line: ``--help`` that says what a bench is for, what it writes
and roughly how long it runs, and argparse's exit 2 on an argument it does not know.

Every bench's ``if __name__ == "__main__":`` block builds its parser here and parses the command
line before it runs anything, so ``python -m bench.X --help`` prints and exits 0 without
touching ``bench/results`` (a bench used to ignore ``--help`` and overwrite its results).
"""

from __future__ import annotations

import argparse
import textwrap

WIDTH = 88


def first_paragraph(doc: str | None) -> str:
    """The docstring's first paragraph as one line (its summary; the rest is the method)."""
    paragraphs = textwrap.dedent(doc or "").strip().split("\n\n")
    return " ".join(paragraphs[0].split())


def bench_parser(
    module: str, doc: str | None, *, writes: str, runtime: str
) -> argparse.ArgumentParser:
    """A parser for ``python -m MODULE``: the description is ``doc``'s first paragraph, the
    epilog says what the bench ``writes`` and roughly how long it runs (``runtime``, on the
    project's two shared cores). Add the bench's own options, then ``parse_args()`` before any
    work."""
    if not writes or not runtime:
        raise ValueError(f"{module}: say what the bench writes and roughly how long it runs")
    epilog = "\n".join(
        textwrap.fill(line, WIDTH, subsequent_indent="  ", break_on_hyphens=False)
        for line in (
            f"writes: {writes}",
            f"runs: {runtime}",
            f"the method: python -m pydoc {module}",
        )
    )
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=textwrap.fill(first_paragraph(doc), WIDTH, break_on_hyphens=False),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
