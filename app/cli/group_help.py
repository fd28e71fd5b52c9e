"""``planner --help`` drawn with rich alone, as Typer draws it, without Typer's help module.

``typer.rich_utils`` imports rich's Markdown (markdown-it), Syntax and Traceback (pygments) at
module level: about two thirds of the start-up of ``planner --help``, for features the command
list never uses. :func:`print_group_help` draws the same panels from the few pieces the
top-level group has (usage, one line of help, options, the command list, the epilog);
tests/app/cli/test_startup.py checks that the output is the same, character for character and
style for style, as ``typer.rich_utils.rich_format_help``. The styles mirror that module's
defaults (typer 0.29).
"""

from __future__ import annotations

import inspect
import os
import re
from typing import Any, ClassVar

from rich.align import Align
from rich.columns import Columns
from rich.console import Console
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme


class _OptionHighlighter(RegexHighlighter):  # typer.rich_utils.OptionHighlighter
    highlights: ClassVar[list[str]] = [
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<types>\<[^\>]+\>)",
        r"(?P<usage>Usage: )",
    ]


class _TypesHighlighter(RegexHighlighter):  # typer.rich_utils.TypesHighlighter
    highlights: ClassVar[list[str]] = [
        r"^(?P<types_sep>(\[|<))",
        r"(?P<types_sep>\|)",
        r"(?P<types_sep>(\]|>))(\.\.\.)?$",
    ]


_THEME = {
    "option": "bold cyan",
    "switch": "bold green",
    "negative_option": "bold magenta",
    "negative_switch": "bold red",
    "types": "bold yellow",
    "types_sep": "dim",
    "usage": "yellow",
}
# the options and commands tables of typer.rich_utils (STYLE_*_TABLE_* there)
_TABLE: dict[str, Any] = {"show_header": False, "expand": True, "box": None, "show_lines": False,
                          "leading": 0, "border_style": None, "row_styles": None,
                          "pad_edge": False, "padding": (0, 1)}  # fmt: skip
_EMOJI_CODE = re.compile(r":\S*?:")  # what rich.markup would replace (rich/_emoji_replace.py)
_highlight = _OptionHighlighter()
_highlight_types = _TypesHighlighter()


def _console() -> Console:
    """typer.rich_utils._get_rich_console: its environment switches read the same way."""
    width = os.getenv("TERMINAL_WIDTH")
    force = (
        True
        if os.getenv("GITHUB_ACTIONS") or os.getenv("FORCE_COLOR") or os.getenv("PY_COLORS")
        else None
    )
    if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    return Console(
        theme=Theme(_THEME),
        highlighter=_highlight,
        color_system="auto",
        force_terminal=force,
        width=int(width) if width else None,
    )


def _text(text: str, style: str = "") -> Text:
    text = inspect.cleandoc(text)
    if "[" in text or _EMOJI_CODE.search(text):  # markup or an emoji code: rich parses them
        return _highlight(Text.from_markup(text, style=style))
    return _highlight(Text(text, style=style))  # the same Text, without rich's emoji table


def _panel(table: Table, title: str) -> Panel:
    # a Text title: rich reads a str one as markup, loading its emoji table for two words
    return Panel(table, border_style="dim", title=Text(title), title_align="left")


def _options_table(params: list[Any], ctx: Any) -> Table:
    table = Table(highlight=True, **_TABLE)
    for param in params:
        types = Text(style="bold yellow", overflow="fold")
        shown = param.display_type_rich(ctx=ctx)
        if shown is not None:
            types.append(shown)
        helps = [_text(" ".join(param.help.split()))] if param.help else []
        table.add_row(
            _highlight(",".join(o for o in param.opts if "--" in o)),
            _highlight(",".join(o for o in param.opts if "--" not in o)),
            _highlight(""),  # the negative forms (--no-x) of a switch: none here
            _highlight(""),
            _highlight_types(types),
            Columns(helps),
        )
    return table


def _commands_table(commands: list[Any]) -> Table:
    table = Table(highlight=False, **_TABLE)
    width = max((len(c.name or "") for c in commands), default=0)
    table.add_column(style="bold cyan", no_wrap=True, width=width)
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for command in commands:
        first = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        table.add_row(Text(command.name or ""), _text(first.replace("\n", " ").strip()))
    return table


def can_draw(group: Any, ctx: Any) -> bool:
    """Whether this drawing covers everything ``group``'s help has (else Typer draws it)."""
    simple = all(
        p.param_type_name == "option" and p.is_flag and not p.secondary_opts and not p.hidden
        and not p.required and not getattr(p, "show_envvar", False) and not p.show_default
        for p in group.get_params(ctx)
    )  # fmt: skip
    return simple and not group.deprecated and "\n" not in (group.help or "").strip()


def print_group_help(group: Any, ctx: Any, commands: list[Any]) -> None:
    """What ``typer.rich_utils.rich_format_help`` prints for ``group`` (see :func:`can_draw`)."""
    console = _console()
    console.print(Padding(_highlight(group.get_usage(ctx)), 1), style="bold")
    if group.help:
        console.print(Padding(Align(_text(group.help.strip()), pad=False), (0, 1, 1, 1)))
    params = group.get_params(ctx)
    if params:
        console.print(_panel(_options_table(params, ctx), "Options"))
    shown = [c for c in commands if not c.hidden]
    if shown:
        console.print(_panel(_commands_table(shown), "Commands"))
    if group.epilog:
        console.print(Padding(Align(_text(group.epilog), pad=False), 1))
