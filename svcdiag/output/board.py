"""`svcdiag top`'s board: a rich table of every unit, full-screen on a terminal, once when piped.

rich is imported only here, and only when the live board is drawn, so the CLI starts fast; the
piped snapshot is written as plain text that is rich's table byte for byte (`plain_text`).
Colour follows the state (NO_COLOR honoured: rich reads it), failing rows first.
"""

from __future__ import annotations

import os
import sys
import termios
import tty
from typing import Any, TextIO

from svcdiag.output.progress import bar_text, duration

#: svcdiag.ops.serve.board.BoardRow (output sits below ops, so it is duck-typed here)
BoardRow = Any

STYLE = {"failed": "bold red", "timed_out": "bold red", "wedged": "bold red", "starting": "cyan", "degraded": "yellow",
         "healthy": "green", "stopped": "dim", "inactive": "dim", "not installed": "dim"}
COLUMNS = ("unit", "state", "phase", "progress", "ETA (slowest)", "in phase", "elapsed", "kv tokens", "max_running", "degraded",
           "last verdict")
#: columns as wide as their widest cell (the last verdict takes the rest, and ends in … on a narrow terminal)
_KEEP = ("unit", "state", "phase", "progress", "ETA (slowest)", "in phase", "elapsed", "kv tokens", "max_running", "degraded")
_WHAT = {"shards": "shards", "cuda_graph": "batches"}
_DEGRADED = {"max_running_reduced": "max_running↓", "kv_below_context": "kv<context", "unified_memory": "unified mem",
             "port_moved": "port moved"}


def interactive(out: TextIO) -> bool:
    return out.isatty() and os.environ.get("TERM", "") != "dumb"


def _s(v: float | None) -> str:
    return "-" if v is None else duration(v)


def cells(row: BoardRow) -> tuple[str, ...]:
    """One row as plain text cells (the table's, and a test's)."""
    p = row.progress
    progress = eta = ""
    if p is not None:
        progress = f"{bar_text(p.fraction, 10)} {p.percent:3d}% {p.done}/{p.total} {_WHAT.get(p.what, p.what)}"
        eta = duration(p.eta_s) if p.eta_s is not None and p.done < p.total else ""
        if p.slowest_rank is not None:
            eta += f" (TP{p.slowest_rank})"
    in_phase = elapsed = ""
    if row.elapsed_s is not None:
        in_phase = _s(row.phase_elapsed_s) + (f" / ~{_s(row.usual_phase_s)}" if row.usual_phase_s is not None else "")
        elapsed = _s(row.elapsed_s) + (f" / ~{_s(row.usual_s)}" if row.usual_s is not None else "")
    elif row.uptime_s is not None:
        elapsed = f"up {_s(row.uptime_s)}"
    kv = f"{row.kv_tokens:,}" if row.kv_tokens is not None else "-"
    mr = "-" if row.max_running is None else str(row.max_running)
    if row.max_running_requested is not None and row.max_running_requested != row.max_running:
        mr += f" / {row.max_running_requested}"
    verdict = ""
    if row.verdict:
        verdict = row.verdict + (f" [{row.cause}]" if row.cause else "")
        if row.verdict != "healthy" and row.message:
            verdict += f": {row.message}"
        elif row.watch is not None and row.watch[0] != "serving":  # after ready: busy, wedged
            verdict += f" · {row.watch[1]}"
    degraded = " ".join(f"!{_DEGRADED.get(d, d)}" for d in row.degraded)
    return (row.name, row.state, row.phase or "-", progress, eta, in_phase, elapsed, kv, mr, degraded, verdict)


def table(rows: list[BoardRow], *, title: str | None = None) -> Any:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", expand=True, pad_edge=False,
              padding=(0, 1), collapse_padding=True)
    table_cells = [cells(row) for row in rows]
    for i, name in enumerate(COLUMNS):  # one line per unit: what does not fit ends in …
        widest = max([len(name), *(len(c[i]) for c in table_cells)])
        t.add_column(name, no_wrap=True, overflow="ellipsis", width=widest if name in _KEEP else None,
                     ratio=None if name in _KEEP else 1)
    for row, row_cells in zip(rows, table_cells, strict=True):  # Text, not markup: `[killed_by_signal]` is no style
        t.add_row(*(Text(c) for c in row_cells), style=STYLE.get(row.state))
    return t


def render_text(rows: list[BoardRow], width: int | None = None) -> str:
    """One snapshot for a pipe or a file: the same table, without colour or cursor moves. Written here
    without rich (its import and layout were half of a snapshot's cost) wherever the text is sure to
    be rich's: plain cells and room for every column; otherwise drawn by rich."""
    width = width or int(os.environ.get("COLUMNS") or 200)
    text = plain_text([cells(row) for row in rows], width)
    return text if text is not None else rich_text(rows, width)


#: the cells plain_text lays out as rich would: printable ASCII and the board's own one-cell glyphs
_PLAIN = frozenset(map(chr, range(0x20, 0x7F))) | frozenset("█▏▎▍▌▋▊▉…↓·")


def plain_text(table_cells: list[tuple[str, ...]], width: int) -> str | None:
    """rich's SIMPLE_HEAD table of `table()` (no edge padding, collapsed padding, every column but the
    last as wide as its widest cell, the last taking the rest and ending in … where its text does
    not fit), as rich prints it uncoloured with each line's trailing blanks cut; None where this
    layout would not be rich's: a cell with any other character (tabs, newlines, wide or combining
    ones) or a width with no room for the last column."""
    if any(not _PLAIN.issuperset(c) for row in table_cells for c in row):
        return None
    n = len(COLUMNS)
    widths = [max([len(name), *(len(c[i]) for c in table_cells)]) + 1 for i, name in enumerate(COLUMNS[:-1])]
    last = width - (2 + n - 1) - sum(widths)  # the box's two edges and the separators between columns
    if last < 2:
        return None

    def line(row: tuple[str, ...]) -> str:
        end = row[-1] if len(row[-1]) <= last else row[-1][:last - 1] + "…"
        return (" " + " ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + " " + end).rstrip()

    out = ["", line(COLUMNS), " " + "─" * (width - 2), *(line(row) for row in table_cells), ""]
    return "\n".join(out) + "\n"


def rich_text(rows: list[BoardRow], width: int) -> str:
    """The snapshot as rich draws it (`render_text` where plain_text declines)."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, highlight=False)
    console.print(table(rows))
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"


class Screen:
    """The full-screen board: the terminal's alternate screen, keys read one at a time, redrawn on demand."""

    def __init__(self, out: TextIO = sys.stdout, keys: TextIO = sys.stdin):
        self.out, self.keys = out, keys
        self._saved: Any = None
        self._live: Any = None

    @property
    def keys_fd(self) -> int | None:
        return self.keys.fileno() if self.keys.isatty() else None

    def key(self) -> str:
        return os.read(self.keys.fileno(), 1).decode(errors="replace")

    def __enter__(self) -> Screen:
        from rich.console import Console
        from rich.live import Live

        if self.keys.isatty():
            self._saved = termios.tcgetattr(self.keys.fileno())
            tty.setcbreak(self.keys.fileno())
        console = Console(file=self.out, highlight=False)
        self._live = Live(console=console, screen=True, auto_refresh=False, transient=True)
        self._live.__enter__()
        return self

    def draw(self, rows: list[BoardRow]) -> None:
        import time

        title = f"svcdiag top  {time.strftime('%H:%M:%S')}  {len(rows)} units  (q quits)"
        self._live.update(table(rows, title=title), refresh=True)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
        if self._saved is not None:
            termios.tcsetattr(self.keys.fileno(), termios.TCSADRAIN, self._saved)
