"""PID 1's lines about a unit ("Main process exited, code=killed, status=9/KILL"), as events."""

from __future__ import annotations

from svcdiag.judge.verdict import UnitState
from svcdiag.sglang import lazy_re

_EXITED_RE = lazy_re.compile(r"Main process exited, code=(\w+), status=([\w/+-]+)")
_RESULT_RE = lazy_re.compile(r"Failed with result '([\w-]+)'")


def parse_systemd(text: str, ts: float | None = None, invocation: str | None = None) -> UnitState | None:
    """PID 1's lines about a unit (`UNIT=`), with any "unit.service: " prefix already cut."""
    if (m := _EXITED_RE.search(text)) is not None:
        return UnitState(ts=ts, line=text, state="exited", code=m.group(1), status=m.group(2), invocation=invocation)
    if (m := _RESULT_RE.search(text)) is not None:
        return UnitState(ts=ts, line=text, state="result", result=m.group(1), invocation=invocation)
    if "start operation timed out" in text:  # a notify unit's phase deadline, enforced by systemd
        return UnitState(ts=ts, line=text, state="timeout", invocation=invocation)
    if "Watchdog timeout" in text:  # `Watchdog timeout (limit 2s)!`: systemd's watchdog fired (then SIGABRT)
        return UnitState(ts=ts, line=text, state="watchdog", invocation=invocation)
    if "killed by the OOM killer" in text:
        return UnitState(ts=ts, line=text, state="oom", invocation=invocation)
    if text.startswith("Started "):
        return UnitState(ts=ts, line=text, state="started", invocation=invocation)
    if text.startswith("Starting "):
        return UnitState(ts=ts, line=text, state="starting", invocation=invocation)
    if text.startswith("Stopping "):
        return UnitState(ts=ts, line=text, state="stopping", invocation=invocation)
    if text.startswith(("Stopped ", "Deactivated successfully")):
        return UnitState(ts=ts, line=text, state="stopped", invocation=invocation)
    return None
