"""An event record as the one line `Lines` prints for it (a milestone, a phase, a failure), from its JSON
form: `logs --milestones` prints a start's published records with it, without the event types report.py
imports (svcdiag.ops.serve.milestones)."""

from __future__ import annotations

import time


def clock(ts: float | None) -> str:
    """A record's time of day, local, as every line shows it."""
    if ts is None:
        return "        "
    return time.strftime("%H:%M:%S", time.localtime(ts))


def event_line(event: str, ts: float | None, cause: str | None, message: str | None, who: str = "") -> str | None:
    """`  HH:MM:SS  [who]message` (a failure's message after its cause); None for a record without one."""
    if not message:
        return None
    what = f"failure ({cause}): " if event == "failure" else ""
    return f"  {clock(ts)}  {who}{what}{message}\n"
