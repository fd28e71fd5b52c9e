"""The launch command and script of a plan, laid out for people: one flag and its value per
line (a bash continuation), and a script whose site-specific parts are commented placeholders.
"""

from __future__ import annotations

import shlex

from app.planning.reports import RankedPlan

INDENT = "    "

RENDEZVOUS = (
    ("MASTER_ADDR", '"${MASTER_ADDR:?set MASTER_ADDR to the address of the first node}"'),
    ("MASTER_PORT", '"${MASTER_PORT:-6000}"'),
    ("NODE_RANK", '"${NODE_RANK:?set NODE_RANK: 0 on the first node, 1 on the next, ...}"'),
)
"""Rendezvous variables, defined only when the command uses them (multi-node runs)."""
DATA = (
    "# Data and tokenizer: fill these in for your run (preprocess_data.py output prefix).",
    'DATA_PATH="${DATA_PATH:?set DATA_PATH to the .bin/.idx prefix of your dataset}"',
    'TOKENIZER_MODEL="${TOKENIZER_MODEL:?set TOKENIZER_MODEL to a tokenizer path or name}"',
    'TOKENIZER_TYPE="${TOKENIZER_TYPE:-HuggingFaceTokenizer}"',
)
"""Lines the script defines before the command; ``:?`` stops it with a message when unset."""

SITE_FLAGS = (
    "--data-path",
    "$DATA_PATH",
    "--tokenizer-type",
    "$TOKENIZER_TYPE",
    "--tokenizer-model",
    "$TOKENIZER_MODEL",
)
"""Flags the plan cannot know, appended to the script's command from the placeholders."""


def _tokens(plan: RankedPlan) -> list[str]:
    if plan.megatron.command:
        return shlex.split(plan.megatron.command)
    return ["torchrun", "pretrain_gpt.py", *plan.megatron.args]


def _quote(token: str) -> str:
    """Shell-quote a token, leaving a ``$VAR`` reference expandable (in double quotes)."""
    if token.startswith("$") and token[1:].replace("_", "").isalnum():
        return f'"{token}"'
    return shlex.quote(token)


def _is_flag(token: str) -> bool:
    return token.startswith("--") or (len(token) > 1 and token[0] == "-" and token[1].isalpha())


def flag_lines(tokens: list[str]) -> list[str]:
    """Group tokens into lines: each leading ``VAR=value`` assignment, the launcher, the script
    (``*.py``) and each ``--flag`` with the values that follow it (never split from them)."""
    lines: list[str] = []
    current: list[str] = []
    program_seen = after_assignment = False
    for token in tokens:
        assignment = not program_seen and not _is_flag(token) and "=" in token
        script = token.endswith(".py") and not _is_flag(token)
        if current and (_is_flag(token) or assignment or script or after_assignment):
            lines.append(" ".join(current))
            current = []
        program_seen, after_assignment = program_seen or not assignment, assignment
        current.append(_quote(token))
    if current:
        lines.append(" ".join(current))
    return lines


def launch_command(plan: RankedPlan, extra: tuple[str, ...] = ()) -> str:
    """The torchrun command, one flag per line with a trailing backslash: it reads, wraps on
    flag boundaries on a phone, and pastes into a shell as one command."""
    lines = flag_lines(_tokens(plan) + list(extra))
    return (" \\\n" + INDENT).join(lines)


def launch_script(plan: RankedPlan) -> str:
    """A bash script: the environment, placeholders for rendezvous, data and tokenizer (it stops
    with a message naming any that is unset), then the command with the data flags added."""
    from app.web.present import is_moe
    from app.web.views import layout_text

    megatron = plan.megatron
    lines = [
        "#!/usr/bin/env bash",
        "# Launch script written by Parallel Planner.",
        f"# Layout: {layout_text(plan.layout, moe=is_moe(plan))}",
        "# Run it on every node with the variables below set (or edit the defaults here).",
        "set -euo pipefail",
        "",
    ]
    tokens = _tokens(plan)
    used = [(name, value) for name, value in RENDEZVOUS if f"${name}" in tokens]
    if used:
        lines.append("# Rendezvous: the same on every node except NODE_RANK.")
        lines += [f"{name}={value}" for name, value in used]
        lines.append("")
    lines += [*DATA, ""]
    for key, value in megatron.env.items():
        lines.append(f"export {key}={shlex.quote(value)}")
    if megatron.notes:
        lines.append("")
        lines += [f"# Note: {n}" for n in megatron.notes]
    lines += ["", launch_command(plan, SITE_FLAGS), ""]
    return "\n".join(lines)
