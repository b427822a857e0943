"""What every command prints through: its exit codes, the console its tables go to, how an
error reads, and whether a table fits the terminal."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from polythink.errors import PolythinkError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PIPE_WIDTH",
    "WIDE",
    "error_message",
    "new_console",
    "renders_whole",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

PIPE_WIDTH = 160
"""Columns a table is laid out for when the output is not a terminal (and ``COLUMNS`` unset)."""

WIDE = 120
"""Terminal columns from which the demo prints its wide table (notes inline, long headers)."""


def new_console() -> Console:
    """A console for a command's output: the terminal's width, or :data:`PIPE_WIDTH` columns
    when piped."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped output has no width to fit; one line per row reads better in logs.
        console.width = PIPE_WIDTH
    return console


def error_message(exc: BaseException) -> str:
    """What an error says, without the class name: a polythink error's own message."""
    return exc.message if isinstance(exc, PolythinkError) else str(exc)


def renders_whole(table: Table, width: int, cells: Sequence[Sequence[str]]) -> bool:
    """Whether ``table`` printed in ``width`` columns keeps every word of its ``cells`` whole.

    The table's columns must wrap between words only (``overflow="ellipsis"``, rich's
    default): a word wider than its column is then cut with ``…``, so the table renders
    whole exactly when it holds no more ``…`` than its cells and headers do."""
    buffer = io.StringIO()
    Console(width=width, file=buffer, color_system=None, highlight=False).print(table)
    out = buffer.getvalue()
    own = sum(cell.count("…") for row in cells for cell in row)
    own += sum(str(column.header).count("…") for column in table.columns)
    return out.count("…") <= own
