"""How a process ended when no row above names why: a signal, an exit, a stop, a hang SGLang's watchdog saw, a log that
stops.
"""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.causes import EXIT_STATUS, KERNEL_CHECK, SIGKILLED, SIGNALLED, UNNAMED  # noqa: F401  (the package's names)
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, Role, said

#: the families whose rows this module files
FAMILIES = (Family.PROCESS,)


def _watchdog(w: Mapping[str, str]) -> Mapping[str, str]:
    return {"waited": f"{float(w['secs']):g} s" if w["secs"] else "watchdog_timeout seconds"}


ROWS: tuple[FailureClass, ...] = (
    # SGLang's own watchdog: a forward pass (or the tokenizer) made no progress for --watchdog-timeout s
    FailureClass(Cause.WATCHDOG_TIMEOUT, priority=20, line=lazy_re.compile(r"[Ww]atchdog timeout \(self\.watchdog_timeout="),
        alone=(Own(Place.MESSAGE, lazy_re.compile(r"Scheduler debug info:"),  # its dump of the scheduler, before the timeout
                   says="SGLang's watchdog saw no progress and dumped the scheduler's state (`Scheduler debug info:`): a hang"),
               Own(Place.MESSAGE)),  # its timeout line, where SGLang's own message says it
        doc="SGLang's own watchdog found a batch stuck and killed the server",
        words=_watchdog),
    FailureClass(Cause.KILLED_BY_SIGNAL, priority=280, role=Role.CONSEQUENCE,
        doc="a process of the server was killed by a signal (a consequence: a cause said before it wins)"),
    FailureClass(Cause.EXITED, priority=290, role=Role.CONSEQUENCE,
        doc="the server exited before ready with no cause of its own said (a consequence)"),
    FailureClass(Cause.DIED_SILENTLY, priority=300, role=Role.CONSEQUENCE,
        doc="the server's processes ended without a word: something killed them from outside",
        fixes=(({"mem_fraction_static": 0.7}, "on a unified-memory machine, to leave the host RAM the processes need"),)),
    FailureClass(Cause.STOPPED, priority=310, role=Role.CONSEQUENCE,
        doc="the start was stopped from outside before ready"),
    FailureClass(Cause.EXCEPTION, priority=320,
        doc="any other traceback, to its final exception line"),
    FailureClass(Cause.TIMED_OUT, priority=330,
        doc="no progress in a phase past its deadline, and no error said"),
    FailureClass(Cause.INCOMPLETE, priority=340,
        doc="the log ends before a verdict: no error, no ready line"),
    FailureClass(Cause.CONNECTION_LOST, priority=345, doc="the log could no longer be read (a remote host's connection died)"),
    FailureClass(Cause.WATCHDOG_TIMEOUT, "timeout_said", priority=710, said=said(r"watchdog_timeout=(?P<secs>\d+(?:\.\d+)?)"),
                 doc="Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"),
)
