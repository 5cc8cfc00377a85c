"""What the judge says: systemd's own account of the unit, phase changes, and the verdict.

The grammar's events (svcdiag.sglang.events) are what SGLang printed; these are what the
readiness machine concludes from them and from PID 1's lines about the unit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from svcdiag.sglang.events import Event
from svcdiag.sglang.figures import Figures

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any

# ---------------------------------------------------------------- systemd's lines about the unit


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitState(Event):
    """What systemd says of the unit (PID 1's lines): how the process ended, beside what the log says."""

    kind = "unit"
    state: str  # starting | started | stopping | stopped | exited | result | oom | watchdog | timeout
    code: str | None = None  # exited | killed | dumped (with state=exited)
    status: str | None = None  # "1/FAILURE", "11/SEGV", "9/KILL"
    result: str | None = None
    invocation: str | None = None

    @property
    def signal(self) -> str | None:
        """The signal of systemd's `code=killed|dumped, status=N/SIG` exit line ("KILL", "SEGV")."""
        if self.code in ("killed", "dumped") and self.status:
            return self.status.split("/")[-1]
        return None


# ---------------------------------------------------------------- the state machine's


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseChange(Event):
    """The start moved to the next phase, and how long the one it left took."""

    kind = "phase"
    phase: str
    previous: str
    previous_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict(Event):
    """The judgement of one start: healthy, failed, timed out or incomplete, why, and its figures."""

    kind = "verdict"
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


#: replay's exit codes, shared by up/wait/status
EXIT_CODES = {"healthy": 0, "failed": 1, "timed_out": 3, "incomplete": 4}
