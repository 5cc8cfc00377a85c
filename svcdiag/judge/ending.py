"""How a healthy server's life ended: one decision, for every path that judges it.

`replay` reads a journal after the fact; `wait` and `up --wait-ready` read the same journal live;
the notify supervisor (`svcdiag supervise`) sees the server's output and its exit status; status,
history, `incident` events, a pod's probes and /metrics show what the supervisor decided. All of
them fold what they saw after ready into `AfterReady` (facts, no judgement: `after`) and ask
`decide` what it means, so that the same log gives the same answer live and offline
(docs/live.md#how-a-healthy-start-ends):

- **stopped**: an operator's `svcdiag down`, `systemctl stop`, a forwarded SIGTERM, ^C: no incident,
  and the deaths after it are the stop's, whatever SGLang calls them;
- **killed**: a process SIGKILLed while serving (the kernel's OOM killer, someone's `kill -9`): from
  outside, so the start stays healthy; a post-ready incident with the signal and, where the log has
  it, the OOM killer's line (systemd's for the unit, the kernel's for that pid);
- **died_after_ready**: the server crashed while serving (a traceback, a segfault, a non-zero exit):
  the server's own failure, so the verdict turns `failed`, cause `died_after_ready`, with the cause;
- **wedged**: systemd's watchdog killed it (the serving watch said wedged and sent WATCHDOG=trigger,
  or WATCHDOG=1 stopped coming): `failed`, cause `died_after_ready`, incident `wedged`.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from svcdiag.judge.verdict import UnitState, Verdict
from svcdiag.sglang import lazy_re
from svcdiag.sglang.causes import Cause
from svcdiag.sglang.events import DEATH, ROOT, Event, Failure, StopRequested

STOPPED, KILLED, DIED, WEDGED = "stopped", "killed", Cause.DIED_AFTER_READY, "wedged"
#: the kinds that are incidents (a stop never is)
INCIDENT_KINDS = (WEDGED, DIED, KILLED)
#: the signals a stop from outside sends (systemd, docker, kubelet: TERM; a terminal's Ctrl-C: INT; its hang-up: HUP)
STOP_SIGNALS = frozenset(("TERM", "INT", "HUP"))
#: ... and the main process's end by SIGQUIT too (`code=dumped, status=3/QUIT`): an operator's (`systemctl kill -s
#: QUIT`, which svcdiag supervise forwards as a stop); SGLang's own SIGQUIT ends in its SIGKILL of itself, never this
EXIT_STOP_SIGNALS = STOP_SIGNALS | {"QUIT"}
#: the kernel's own line: `Out of memory: Killed process 4562 (sglang::schedul) total-vm:…`, `oom-kill:…,task=…,pid=4562`
KERNEL_OOM_RE = lazy_re.compile(r"(?:Out of memory|Memory cgroup out of memory): Killed process (\d+)"
                           r"|\boom-kill:.*?\bpid=(\d+)")
#: a process id a kill line names: `pid=4571`, `(pid=4562)`
PID_RE = lazy_re.compile(r"\bpid=(\d+)")


@dataclass(frozen=True, slots=True)
class AfterReady:
    """What a healthy server's log said after ready, first of each kind: facts, not yet a judgement."""

    #: who stopped it (`systemd`, `SIGTERM`, `uvicorn`, `Ctrl-C`, …) and the line that says so
    stop: str | None = None
    stop_line: str | None = None
    #: the line saying a process was SIGKILLed (SGLang's `… exit code 9`/`-9`, the shell's `Killed`, systemd's
    #: `code=killed, status=9/KILL`) and the pid it names
    kill: Failure | UnitState | None = None
    kill_pid: str | None = None
    #: systemd's word that the OOM killer killed a process of the unit (its line, or Result=oom-kill)
    oom: str | None = None
    #: the kernel's OOM killer lines seen: (pid, line)
    kernel_oom: tuple[tuple[str, str], ...] = ()
    #: a crash: SGLang's fatal line after ready (a traceback's cause, a death line, a fatal signal)
    death: Failure | None = None
    #: systemd's account: the main process's exit line, and the unit's Result=
    exit: UnitState | None = None
    result: str | None = None
    #: systemd's watchdog fired (its line, or Result=watchdog)
    watchdog: str | None = None
    #: when the first of these came (the incident's `since`)
    since: float | None = None


def after(a: AfterReady, ev: Event) -> AfterReady:
    """`a` with one more event of a healthy server's log folded in (unchanged when it says nothing of an ending)."""
    new = _fold(a, ev)
    if new is not a and new.since is None and ev.ts is not None:
        new = dataclasses.replace(new, since=ev.ts)
    return new


def kernel_line(a: AfterReady, text: str) -> AfterReady:
    """`a` with a line of the kernel's OOM killer (`Out of memory: Killed process N …`) kept, once, whatever the
    grammar made of it: `decide` names the one for the killed pid."""
    m = KERNEL_OOM_RE.search(text)
    if m is None:
        return a
    seen = (m.group(1) or m.group(2), text[m.start():] if text.startswith("[") else text)
    return a if seen in a.kernel_oom else dataclasses.replace(a, kernel_oom=(*a.kernel_oom, seen))


def _ended(a: AfterReady) -> bool:
    """Something already ended it: a stop said after this is the end's aftermath (systemd's `Stopped …` after an exit)."""
    return bool(a.death or a.kill or a.exit or a.oom or a.watchdog or a.result)


def _fold(a: AfterReady, ev: Event) -> AfterReady:
    replace = dataclasses.replace
    if isinstance(ev, UnitState):
        if ev.state == "result" and a.result is None and ev.result:
            a = replace(a, result=ev.result)
            if ev.result == "watchdog" and a.watchdog is None:
                a = replace(a, watchdog=ev.line or "systemd: Result=watchdog")
            if ev.result == "oom-kill" and a.oom is None and a.stop is None:
                a = replace(a, oom=ev.line or "systemd: Result=oom-kill")
            return a
        if ev.state == "watchdog" and a.watchdog is None:
            return replace(a, watchdog=ev.line)
        if a.stop is not None:
            return a  # after a stop, every end is the stop's (systemd's SIGKILL after TimeoutStopSec= included)
        if ev.state in ("stopping", "stopped") and not _ended(a):
            return replace(a, stop="systemd", stop_line=ev.line)
        if ev.state == "oom" and a.oom is None:
            return replace(a, oom=ev.line or "systemd: killed by the OOM killer")
        if ev.state == "exited" and a.exit is None and ev.signal in EXIT_STOP_SIGNALS and not _ended(a):
            # the main process ended by a stop's signal (`systemctl kill -s TERM`, a supervisor re-raising the TERM it
            # forwarded) and nothing ended it before: stopped
            return replace(a, exit=ev, stop=f"SIG{ev.signal}", stop_line=ev.line)
        if ev.state == "exited" and a.exit is None:
            a = replace(a, exit=ev)
            if ev.signal == "KILL" and a.kill is None and a.death is None:
                a = replace(a, kill=ev)
            return a
        return a
    if a.stop is not None:
        return a  # after a stop, every death is the stop's
    if isinstance(ev, StopRequested):
        return a if _ended(a) else replace(a, stop=ev.by, stop_line=ev.line)
    if not isinstance(ev, Failure):
        return a
    if KERNEL_OOM_RE.search(ev.line or "") is not None:
        return kernel_line(a, ev.line or "")
    if ev.role in (ROOT, DEATH) and ev.signal in STOP_SIGNALS:
        return a if _ended(a) else replace(a, stop=f"SIG{ev.signal}", stop_line=ev.line)
    if ev.signal == "KILL":
        if a.kill is None and (a.death is None or _mute(a.death)):
            pid = PID_RE.search(ev.line or "")
            return replace(a, kill=ev, kill_pid=pid.group(1) if pid else None, death=None)
        return a
    if ev.role not in (ROOT, DEATH) or a.kill is not None:
        return a  # a suspect is no death yet; after a kill, the deaths are the kill's
    if a.death is None or (a.death.role == DEATH and ev.role == ROOT and not a.death.signal):
        # the first death; a root cause after a bare consequence (a cut traceback ending after the death it caused)
        return replace(a, death=ev)
    return a


def _mute(death: Failure) -> bool:
    """A death that says nothing of its own cause (`Received sigquit`, `Rank 0 scheduler is dead`): a kill after it
    is what happened."""
    return death.role == DEATH and not death.signal and death.cause == Cause.EXCEPTION


@dataclass(frozen=True, slots=True)
class Ending:
    """The decision: how a healthy server's life ended, and whether that is an incident."""

    kind: str  # stopped | killed | died_after_ready | wedged
    #: killed: host_oom (the OOM killer said so) or killed_by_signal; died_after_ready: the death's own cause
    #: (exited, killed_by_signal, cuda_error, …); wedged: the fatal line's before it, if any
    cause: str | None
    #: the words after "the start was healthy, then …"
    message: str
    evidence: tuple[str, ...] = ()
    signal: str | None = None
    #: stopped: who stopped it; killed: the kill's line; the OOM killer's line, where the log has it
    by: str | None = None
    oom_line: str | None = None
    since: float | None = None
    #: systemd's Result= of the unit, where the log says it
    result: str | None = None

    @property
    def incident(self) -> bool:
        return self.kind in INCIDENT_KINDS

    @property
    def healthy(self) -> bool:
        """The start stays healthy: the ending came from outside (a stop, a kill), not from the server."""
        return self.kind in (STOPPED, KILLED)


def decide(a: AfterReady) -> Ending | None:
    """What the facts mean, in this order: systemd's watchdog (wedged); a stop (never an incident);
    a crash before any kill (died_after_ready); a kill, the OOM killer's or anyone's (killed); an end systemd saw
    and nothing in the log explains (died_after_ready, unless it exited 0); None while the server still serves."""
    systemd = _lines(a.exit.line if a.exit else None, f"systemd: Result={a.result}" if a.result else None)
    if a.watchdog is not None:
        cause = a.death.cause if a.death is not None else None
        said = f"; before it, the log said {a.death.message}" if a.death is not None else ""
        return Ending(WEDGED, cause, "systemd's watchdog killed it (the supervisor's serving watch found it wedged and "
                      f"sent WATCHDOG=trigger, or sent no WATCHDOG=1 within WatchdogSec){said}",
                      (*(a.death.evidence[:3] if a.death else ()), *_lines(a.watchdog), *systemd),
                      signal=a.exit.signal if a.exit else None, since=a.since, result="watchdog")
    if a.stop is not None:
        return Ending(STOPPED, None, f"stopped from outside ({a.stop}), a clean stop", _lines(a.stop_line),
                      by=a.stop, since=a.since, result=a.result)
    if a.death is not None:
        return Ending(DIED, a.death.cause, f"the server died while serving: {a.death.message}",
                      (*a.death.evidence[:4], *systemd), signal=a.death.signal,
                      since=a.death.ts if a.death.ts is not None else a.since, result=a.result)
    oom = _oom_line(a)
    if a.kill is not None or a.oom is not None:
        line = a.kill.line if a.kill is not None else None
        who = "the kernel's OOM killer" if oom else \
            "someone outside (the kernel's OOM killer or a `kill -9`: the log does not say which)"
        said = f": {line}" if line else ""
        return Ending(KILLED, Cause.HOST_OOM if oom else Cause.KILLED_BY_SIGNAL,
                      f"a process was killed (SIGKILL) while serving, by {who}{said}",
                      _lines(line, a.oom, *([oom] if oom and oom != a.oom else []), *systemd),
                      signal="KILL", by=line or a.oom, oom_line=oom, since=a.since, result=a.result)
    if (a.exit is not None and (a.exit.code != "exited" or not (a.exit.status or "").startswith("0/"))) \
            or a.result not in (None, "success"):
        sig = a.exit.signal if a.exit else None
        what = f"{a.exit.line} (systemd result {a.result})" if a.exit and a.result else \
            (a.exit.line if a.exit else f"systemd result {a.result}")
        cause = Cause.KILLED_BY_SIGNAL if sig else Cause.EXITED
        return Ending(DIED, cause, f"the unit ended while serving: {what}", systemd, signal=sig, since=a.since,
                      result=a.result)
    if a.exit is not None:  # exited 0 of its own accord: the server chose to end; nothing failed
        return Ending(STOPPED, None, f"the server exited of its own accord ({a.exit.line})", systemd,
                      by="itself (exit status 0)", since=a.since, result=a.result)
    return None


def _oom_line(a: AfterReady) -> str | None:
    """The OOM killer's word for this kill: the kernel's line for the killed pid (or, the pid unknown, where systemd
    says the OOM killer struck this unit, the kernel's first), else systemd's."""
    if a.kill_pid is not None:
        mine = next((line for pid, line in a.kernel_oom if pid == a.kill_pid), None)
        if mine is not None:
            return mine
    elif a.oom is not None and a.kernel_oom:
        return a.kernel_oom[0][1]
    return a.oom


def _lines(*lines: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(line for line in lines if line))


def settle(healthy: Verdict, ending: Ending | None) -> Verdict:
    """The start's verdict once `ending` is known: a stop or a kill keeps it healthy (a kill with the incident in its
    message and figures); a crash or the watchdog turns it into `failed`, cause died_after_ready, the start's figures
    kept."""
    if ending is None:
        return healthy
    evidence = tuple(dict.fromkeys((*healthy.evidence, *ending.evidence)))
    f = healthy.figures
    if ending.kind == STOPPED:
        return healthy.with_(evidence=evidence, message=f"{healthy.message}; later {ending.message}",
                             figures=f.replace(stopped_after_ready_by=ending.by))
    if ending.kind == KILLED:
        return healthy.with_(evidence=evidence, message=f"{healthy.message}; post-ready incident: {ending.message}",
                             figures=f.replace(incident=KILLED, killed_after_ready=ending.by,
                                               oom_killer_line=ending.oom_line, unit_result=ending.result))
    return healthy.with_(verdict="failed", phase="ready", cause=Cause.DIED_AFTER_READY,
                         ts=ending.since if ending.since is not None else healthy.ts,
                         message=f"the start was healthy, then {ending.message}", evidence=evidence,
                         figures=f.replace(incident=ending.kind, died_of=ending.cause, unit_result=ending.result))
