"""A live status line per unit at the bottom of a terminal, under the scrolling milestones.

A 2-minute start must visibly move: the line shows the phase, its progress bar (weight
shards, CUDA-graph batches: percentage, ETA, the slowest rank), the time since the start,
the time left before the phase's deadline, and the last milestone, redrawn at most four
times a second. Only on a real terminal (not with --json, not piped); colour unless NO_COLOR is
set (https://no-color.org). Under TERM=dumb (Emacs' shell, some IDE consoles) it is one line
redrawn with a carriage return alone, without colour or cursor movement.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, TextIO

from svcdiag.judge.progress import PhaseProgress
from svcdiag.output.progress import bar_text, progress_text
from svcdiag.output.publish import Progress, wants_live  # noqa: F401 -- wants_live: where it was
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


def _terminal_size(fallback: tuple[int, int]) -> os.terminal_size:
    import shutil  # here: shutil brings bz2 and lzma (~5 ms), and only a live line needs it

    return shutil.get_terminal_size(fallback)


def colour_enabled() -> bool:
    return not os.environ.get("NO_COLOR")


class LiveTerminal(Lines):
    def __init__(self, out: TextIO, *, colour: bool | None = None, dumb: bool | None = None):
        super().__init__(out)
        #: a terminal that knows only \r: one line, no escape sequences
        self.dumb = os.environ.get("TERM", "") == "dumb" if dumb is None else dumb
        self.colour = (colour_enabled() if colour is None else colour) and not self.dumb
        self.units: dict[str, dict[str, Any]] = {}
        self._drawn = 0
        self._last_draw = 0.0
        self._closed = False

    def _style(self, text: str, **kw: Any) -> str:
        return _sgr(text, **kw) if self.colour else text

    def publish(self, rec: ReadinessEvent) -> None:
        if rec.event == "progress":
            self._progress_record(rec)
            return
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
        u.update(phase=p.phase, started=p.started, deadline=p.deadline, now=p.now,
                 phase_started=getattr(p, "phase_started", None), usual=getattr(p, "usual", None))
        self._redraw(p.now)

    def _progress_record(self, rec: ReadinessEvent) -> None:
        """A bar's update: kept at once, drawn with the next redraw (≤ 4 a second)."""
        key = rec.unit or rec.config
        if key is None or not rec.phase or "done" not in rec.figures:
            return
        u = self.units.setdefault(key, {"name": rec.config or rec.unit})
        u["bar"] = PhaseProgress.from_figures(rec.phase, rec.figures, rec.ts)
        if rec.ts is not None:
            self._redraw(rec.ts)

    def _redraw(self, now: float) -> None:
        if now - self._last_draw >= REDRAW_EVERY:
            self._last_draw = now
            self._clear()
            self._draw()
            self.out.flush()

    def bar(self, u: dict[str, Any]) -> str | None:
        """The current phase's bar: `[████▌     ] 41% (5/12 shards), ETA 4 s, slowest TP3`."""
        p: PhaseProgress | None = u.get("bar")
        if p is None or p.phase != (u.get("phase") or "starting"):
            return None
        now = u.get("now")
        if p.eta_s is not None and now is not None and p.ts is not None and now > p.ts:
            p = dataclasses.replace(p, eta_s=max(p.eta_s - (now - p.ts), 0.0))  # counts down between updates
        return f"[{self._style(bar_text(p.fraction, 16), fg='cyan')}] {progress_text(p)}"

    def status_line(self, u: dict[str, Any]) -> str:
        if u.get("verdict"):
            return ""  # the verdict block says it all
        parts = [self._style(u["name"], bold=True), "phase " + self._style(u.get("phase") or "starting", fg="cyan")]
        bar = self.bar(u)
        if bar:
            parts.append(bar)
        now = u.get("now")
        if now is not None and u.get("started") is not None:
            parts.append(f"{now - u['started']:.1f} s")
        if now is not None and u.get("deadline") is not None:
            left = u["deadline"] - now
            parts.append(self._style(f"{max(left, 0):.0f} s left on the deadline",
                                     fg="yellow" if left < 30 else None))
        if now is not None and u.get("usual") is not None and u.get("phase_started") is not None:
            eta = u["phase_started"] + u["usual"] - now  # history's ETA for this phase (svcdiag history)
            parts.append(f"ETA {eta:.0f} s (usually {u['usual']:.0f} s)" if eta >= 0 else
                         self._style(f"{-eta:.0f} s over its usual {u['usual']:.0f} s", fg="yellow"))
        if u.get("last"):
            parts.append(u["last"])
        width = _terminal_size((100, 24)).columns - 1
        line = "  ".join(parts)
        plain = _ANSI.sub("", line)
        return line if len(plain) <= width else plain[: width - 1] + "…"

    def _draw(self) -> None:
        if self._closed:
            return
        lines = [s for s in (self.status_line(u) for u in self.units.values()) if s]
        if self.dumb:  # _drawn: the characters to blank out next time
            line = " | ".join(lines)[: _terminal_size((100, 24)).columns - 1]
            self.out.write(line)
            self._drawn = len(line)
            return
        if lines:
            self.out.write("\n".join(lines))
        self._drawn = len(lines)

    def _clear(self) -> None:
        if self._drawn and self.dumb:
            self.out.write("\r" + " " * self._drawn + "\r")
            self._drawn = 0
        elif self._drawn:
            self.out.write("\r\x1b[2K" + "\x1b[1A\x1b[2K" * (self._drawn - 1))
            self._drawn = 0

    def close(self) -> None:
        self._clear()
        self._closed = True
        self.out.flush()

