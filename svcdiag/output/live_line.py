"""A live status line per unit at the bottom of a terminal, under the scrolling milestones.

A 2-minute start must visibly move: the line shows the phase, the time since the start,
the time left before the phase's deadline, and the last milestone, redrawn a few times a
second. Only on a real terminal (not with --json, not piped, not TERM=dumb); colour
unless NO_COLOR is set (https://no-color.org).
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any, TextIO

from svcdiag.output.publish import Progress
from svcdiag.output.report import HEADS, Lines
from svcdiag.output.schema import ReadinessEvent

REDRAW_EVERY = 0.25
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FG = {"red": 31, "green": 32, "yellow": 33, "cyan": 36}


def _sgr(text: str, *, bold: bool = False, fg: str | None = None, dim: bool = False) -> str:
    """ANSI styling, as click.style does it, without importing click below the CLI."""
    codes = [str(c) for c in ((1 if bold else None), (2 if dim else None), _FG.get(fg or "")) if c]
    return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes else text
_VERDICT_COLOUR = {"healthy": "green", "failed": "red", "timed_out": "red", "incomplete": "yellow"}


def wants_live(out: TextIO, as_json: bool) -> bool:
    return not as_json and out.isatty() and os.environ.get("TERM", "") != "dumb"


def colour_enabled() -> bool:
    return not os.environ.get("NO_COLOR")


class LiveTerminal(Lines):
    def __init__(self, out: TextIO, *, colour: bool | None = None):
        super().__init__(out)
        self.colour = colour_enabled() if colour is None else colour
        self.units: dict[str, dict[str, Any]] = {}
        self._drawn = 0
        self._last_draw = 0.0
        self._closed = False

    def _style(self, text: str, **kw: Any) -> str:
        return _sgr(text, **kw) if self.colour else text

    def publish(self, rec: ReadinessEvent) -> None:
        text = self.text(rec)
        key = rec.unit or rec.config
        if key and rec.event != "note":
            u = self.units.setdefault(key, {"name": rec.config or rec.unit})
            if rec.phase:
                u["phase"] = rec.phase
            if rec.event == "milestone" and rec.message:
                u["last"] = rec.message
            if rec.event == "verdict":
                u["verdict"] = rec.verdict
        if text:
            if rec.event == "verdict" and rec.verdict in HEADS:
                head = HEADS[rec.verdict]
                text = text.replace(head, self._style(head, bold=True, fg=_VERDICT_COLOUR[rec.verdict]), 1)
            self._clear()
            self.out.write(text)
            self._draw()
        self.out.flush()

    def progress(self, p: Progress) -> None:
        key = p.unit or p.config
        if key is None:
            return
        u = self.units.setdefault(key, {"name": p.config or p.unit})
        u.update(phase=p.phase, started=p.started, deadline=p.deadline, now=p.now)
        if p.now - self._last_draw >= REDRAW_EVERY:
            self._last_draw = p.now
            self._clear()
            self._draw()
            self.out.flush()

    def status_line(self, u: dict[str, Any]) -> str:
        if u.get("verdict"):
            return ""  # the verdict block says it all
        parts = [self._style(u["name"], bold=True), "phase " + self._style(u.get("phase") or "starting", fg="cyan")]
        now = u.get("now")
        if now is not None and u.get("started") is not None:
            parts.append(f"{now - u['started']:.1f} s")
        if now is not None and u.get("deadline") is not None:
            left = u["deadline"] - now
            parts.append(self._style(f"{max(left, 0):.0f} s left on the deadline",
                                     fg="yellow" if left < 30 else None))
        if u.get("last"):
            parts.append(u["last"])
        width = shutil.get_terminal_size((100, 24)).columns - 1
        line = "  ".join(parts)
        plain = _ANSI.sub("", line)
        return line if len(plain) <= width else plain[: width - 1] + "…"

    def _draw(self) -> None:
        if self._closed:
            return
        lines = [s for s in (self.status_line(u) for u in self.units.values()) if s]
        if lines:
            self.out.write("\n".join(lines))
        self._drawn = len(lines)

    def _clear(self) -> None:
        if self._drawn:
            self.out.write("\r\x1b[2K" + "\x1b[1A\x1b[2K" * (self._drawn - 1))
            self._drawn = 0

    def close(self) -> None:
        self._clear()
        self._closed = True
        self.out.flush()

