"""Whose phase deadline ends a notify unit's start: its supervisor's.

`svcdiag supervise` reads every line as SGLang prints it and stops the start at its phase's
deadline (STATUS=timed_out …, then exit status 3). A journal reader (`up --wait-ready`, `wait`,
`top`) judges the same lines as journald kept them: where journald dropped milestones it is still
in an earlier phase, whose deadline is not the start's. So while the supervisor runs the start,
the reader's own phase deadline only marks the phase overrun; its timed_out waits for the
supervisor's word (STATUS=, the unit leaving activating/active, READY=1), at most
SUPERVISOR_DEADLINE_GRACE where the two judge the same phase, and with no limit of its own where
the journal lacks lines (systemd's TimeoutStartSec= is the backstop for a supervisor that cannot
act). A unit with no supervisor (journal mode) keeps the reader's deadlines.
"""

from __future__ import annotations

import math

from svcdiag.judge.pipeline import Judge
from svcdiag.ops.serve.status_line import FAILED_STATUS, status_phase
from svcdiag.sglang.events import Event

#: the reader's phase deadline passed, its journal and the supervisor in the same phase, and the
#: supervisor has not acted: how long the reader waits for it. The supervisor's deadline is the
#: later one by its own start-up in the first phase (its clock starts when it runs, not when systemd
#: started the unit), by a moment in the others (it judges a line before journald stamps it), plus
#: D-Bus's delivery on a loaded host; past this the supervisor is taken to be unable to act.
SUPERVISOR_DEADLINE_GRACE = 5.0


def own_deadline(deadline: float, phase: str, status: str, *, dropped: bool) -> float:
    """When a reader in `phase`, whose deadline is `deadline`, may time a start out itself while the
    supervisor (its last STATUS= `status`) runs it: at once once the supervisor has given its own
    verdict; never (math.inf) where its journal lacks lines, journald having said so (`dropped`) or
    the supervisor being in another phase; else SUPERVISOR_DEADLINE_GRACE after `deadline`."""
    if FAILED_STATUS.match(status):
        return deadline
    said = status_phase(status)
    if dropped or (said is not None and said != phase):
        return math.inf
    return deadline + SUPERVISOR_DEADLINE_GRACE


def tick(judge: Judge, now: float, *, supervised: bool, status: str) -> list[Event]:
    """`judge.tick(now)`, where a phase deadline that is the supervisor's (`supervised`: a notify
    unit's start in progress) only marks the phase overrun until the reader's own may stand."""
    r = judge.readiness
    due = r.phase_deadline
    if not supervised or due is None:
        return judge.tick(now)
    return judge.tick(now, evidence=now < own_deadline(due, r.phase, status, dropped=judge.dropped > 0))


def next_deadline(judge: Judge, *, supervised: bool, status: str) -> float | None:
    """When `tick` can next conclude something on a deadline (None: no deadline can)."""
    r = judge.readiness
    due = r.phase_deadline
    if not supervised or due is None or r.verdict is not None:
        return r.next_deadline()
    ends = [own_deadline(due, r.phase, status, dropped=judge.dropped > 0)]
    if not r.overrun:
        ends.append(due)  # the overrun is marked then, so that a timed_out says when the deadline passed
    if r.total_deadline is not None:
        ends.append(r.total_deadline)
    end = min(ends)
    return None if end == math.inf else end
