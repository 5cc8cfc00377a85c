"""What the judge says: systemd's own account of the unit, phase changes, and the verdict.

The grammar's events (svcdiag.sglang.events) are what SGLang printed; these are what the
readiness machine concludes from them and from PID 1's lines about the unit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from svcdiag.sglang.events import Event
from svcdiag.sglang.failures import Cause
from svcdiag.sglang.figures import Figures

# ---------------------------------------------------------------- systemd's lines about the unit


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitState(Event):
    kind: ClassVar[str] = "unit"
    state: str  # starting | started | stopping | stopped | exited | result | oom | watchdog | timeout
    code: str | None = None  # exited | killed | dumped (with state=exited)
    status: str | None = None  # "1/FAILURE", "11/SEGV", "9/KILL"
    result: str | None = None
    invocation: str | None = None


# ---------------------------------------------------------------- the state machine's


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseChange(Event):
    kind: ClassVar[str] = "phase"
    phase: str
    previous: str
    previous_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict(Event):
    kind: ClassVar[str] = "verdict"
    verdict: str  # healthy | failed | timed_out | incomplete
    phase: str
    cause: str | None
    message: str
    detail: str = ""  # the cause's sub-case (sglang/failures/), "" for the cause's own row
    captures: dict[str, str] = field(default_factory=dict)  # what the sub-case's pattern read off the failure
    figures: Figures = field(default_factory=Figures)
    evidence: tuple[str, ...] = ()
    phase_seconds: dict[str, float] = field(default_factory=dict)
    last_line: str | None = None
    stalled_s: float | None = None
    unit: str | None = None
    invocation: str | None = None
    diagnosis: dict[str, Any] | None = None
    #: healthy, but short of what was asked: [{reason, message, figures}] (docs/replay.md#degraded)
    degraded: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.figures, dict):  # a record read back, or a test's literal
            object.__setattr__(self, "figures", Figures(**self.figures))

    def with_(self, **changes: Any) -> Verdict:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out = Event.to_json(self)
        out.pop("line", None)
        out["figures"] = self.figures.to_json()
        return out


#: what systemd's Result of a unit that ended after ready means, in the operator's words
_ENDS = {
    "watchdog": "systemd's watchdog killed it (the supervisor's serving watch found it wedged and sent "
                "WATCHDOG=trigger, or sent no WATCHDOG=1 within WatchdogSec)",
    "oom-kill": "the kernel's OOM killer ended it",
    "core-dump": "it dumped core",
}


def ended_after_ready(v: Verdict, result: str, exit_line: str | None, ended_at: float | None) -> Verdict:
    """A healthy start whose unit has ended since (`wait` on a stopped unit judges the start as it
    ended): a clean stop leaves it healthy; any other end is a failure while serving, the start's
    figures kept. Its HTTP cross-check cannot run: nothing serves. A unit the log shows stopped from outside
    (`Stopping …`, `SIGTERM received`) was stopped, whatever result SGLang's own shutdown left (its main process
    SIGKILLs itself after a child's -15: result `signal`)."""
    if result == "success" or v.figures.stopped_after_ready_by:
        return v
    what = _ENDS.get(result) or (f"{exit_line} (systemd result {result})" if exit_line else f"systemd result {result}")
    return v.with_(verdict="failed", phase="ready", cause=Cause.DIED_AFTER_READY, ts=ended_at or v.ts,
                   message=f"the start was healthy, then the unit ended while serving: {what}",
                   figures=v.figures.replace(unit_result=result),
                   evidence=(*v.evidence, *([exit_line] if exit_line else []), f"systemd: Result={result}"))


#: replay's exit codes, shared by up/wait/status
EXIT_CODES = {"healthy": 0, "failed": 1, "timed_out": 3, "incomplete": 4}
