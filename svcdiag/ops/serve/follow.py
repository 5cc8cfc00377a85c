"""The live path: start a unit, follow exactly this start's journal, and return a verdict
the moment the evidence is there.

One poll loop waits on three things at once: the journal's fd (rotation, journald
restarts), the D-Bus fd (the unit leaving activating/active: fail fast), and, while the
start is in progress, a tick that looks at the journal files' entry counters (see
journal.py): 5 ms while lines flow, then 1 % of the silence so far, up to 100 ms.
Deadlines come from the readiness machine, on the wall clock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.files import open_lock
from svcdiag.judge.pipeline import TAIL_WAIT, Judge
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.serve import deadline_owner
from svcdiag.ops.serve.status_line import FAILED_STATUS, news, status_phase, tells
from svcdiag.sglang.events import Event
from svcdiag.sglang.failures import Cause
from svcdiag.systemd.dbus import Systemd, UnitProps
from svcdiag.systemd.journal import Follower
from svcdiag.systemd.journal_formats import Record
from svcdiag.systemd.remote import ConnectionLost

#: journal mode's tick: a wakeup costs ~0.1 ms of CPU on a VM whatever it does (the timer and the
#: context switch, not our code: a bare C poll loop ~55 µs here), so the schedule is the cost. The
#: tick is TICK_SHARE of the time since this start's last line, between HOT_INTERVAL (lines flowing:
#: 200 a second) and MAX_INTERVAL: the first line after a silence of q waits at most ~q/100 (after
#: 2 s of quiet ≤ 20 ms, after 10 s or more ≤ 100 ms), and a hung start settles at 10 wakeups a
#: second, ~0.1 % of a core. (q/200 measured 0.25 to 0.34 % over bench/latency.py's 30 s window,
#: which begins ~2 s into the silence: too close to #16's 0.3 %.)
HOT_INTERVAL = 0.005
TICK_SHARE = 1 / 100
MAX_INTERVAL = 0.100
#: after this long without a line, a live display hears where the start is once a second, not 4 times
QUIET_AFTER = 2.0
#: after D-Bus says the unit died, how long the journal gets to deliver the lines that explain it
DEATH_GRACE = 0.12
#: a notify unit: how long after a new STATUS= (the supervisor judged a line) the journal's counters
#: are watched for that line, and how often: a tick a quarter of the time since the signal, at least
#: BURST_TICK (so a line journald writes d after the signal waits ≤ d/4 more). The burst ends as
#: soon as the line is read (ANSWER_SLACK); one that finds none (STATUS= of a line already read)
#: costs ~23 wakeups.
BURST_S = 0.1
BURST_TICK = 0.00025
#: which line answers a new STATUS=: one that made an event and that the journal stamped no more
#: than this before the signal came (the supervisor sends STATUS= before it passes the read through,
#: so its line is stamped about when the signal arrives). An older line, read late because nothing
#: announced it (a progress line that changed no STATUS=), does not end the watch for a newer one.
ANSWER_SLACK = 0.01
#: for this long after a new STATUS=, the Unit signal that follows it (every Unit property: ~0.1-0.4 ms
#: to read) waits while the journal is watched for the line: unit state (fail-fast) is at most this late
UNIT_SIGNAL_WAIT = 0.002
#: how often a live display hears where the start is, when nothing else wakes the loop; after
#: QUIET_AFTER without a line, PROGRESS_SILENT (its clock then moves by the second: each such turn of
#: the loop costs ~0.2 ms here, 0.07 % of a core at 4 a second)
PROGRESS_EVERY = 0.25
PROGRESS_SILENT = 1.0
#: a notify unit went active (READY=1: its supervisor judged it healthy) and the journal has not shown
#: the ready line this long after: journald dropped lines, and the supervisor's verdict is taken (at
#: once where journald has said so: its "Suppressed N messages" record, Judge.journal_dropped)
SUPERVISOR_GRACE = 3.0
#: a healthy start whose unit has ended: how long the journal gets to show systemd's account of the end (its
#: `Failed with result …` line) before D-Bus's stands in for it, and how often it is read again meanwhile
END_LINES_WAIT = 1.0
END_LINES_EVERY = 0.2
LOCK_DIR = Path(os.environ.get("SVCDIAG_LOCK_DIR", "/run/svcdiag"))


@dataclass
class Followed:
    """A start followed to its verdict: the judge, the unit's properties and how the wait ended."""

    judge: Judge
    props: UnitProps
    died: bool = False
    #: times the loop woke up while waiting (returns of poll, ticks included): a hung notify start has none
    wakeups: int = 0
    #: the SSH connection to the unit's host died while following (the verdict is incomplete)
    lost: bool = False

    @property
    def verdict(self) -> Verdict | None:
        return self.judge.verdict


def follow(sd: Systemd, cfg: ServiceConfig | None, unit: str, props: UnitProps, *,
           emit: Callable[[Event], None], keep_following: bool = True, total_timeout: float | None = None,
           on_record: Callable[[Record], None] | None = None, until_verdict: bool = True,
           hot_interval: float = HOT_INTERVAL,
           on_progress: Callable[[Judge, float], float | None] | None = None, notify: bool | None = None,
           batch: Callable[[], AbstractContextManager[object]] = nullcontext) -> Followed:
    """Judge invocation `props.invocation` of `unit`, from its first line, until a verdict
    (or, with keep_following=False, until the journal has nothing more to say now).
    `on_progress` is called on every turn of the loop, at least every PROGRESS_EVERY s
    (a notify unit: on every wakeup only, and when it last returned: the time it is next due).

    A notify unit (`notify`, default: the config's `readiness`) tells systemd each milestone
    (STATUS=) as its supervisor sees it: the loop then waits on D-Bus and the journal's fd with
    no timer, and looks at the journal's counters only for a moment (BURST_S) after a signal.
    `batch` wraps each read of the journal (Publisher.terminal_first: stdout before the other sinks)."""
    if notify is None:
        notify = cfg is not None and cfg.readiness == "notify"
    start = props.inactive_exit_ts or props.state_change_ts or time.time()
    judge = Judge(cfg, unit=unit, invocation=props.invocation, total_timeout=total_timeout, start_ts=start)
    loop = _Loop(sd, unit, props.invocation, judge, Followed(judge, props), sd.follower(unit, props.invocation,
                 follow=keep_following), emit=emit, on_record=on_record, on_progress=on_progress, batch=batch,
                 notify=notify, keep_following=keep_following, until_verdict=until_verdict, hot_interval=hot_interval,
                 status=props.status_text)
    loop.listen(props)
    try:
        while not loop.turn():
            pass
    except ConnectionLost as e:  # a remote host's SSH connection died: no verdict can be known from here
        if judge.verdict is None:
            emit(judge.connection_lost(f"{e}; the start was not judged (`svcdiag wait --host` reattaches)",
                                       time.time()))
        loop.result.lost = True
    finally:
        loop.journal.close()
    return loop.settle()


class _Loop:
    """One follow's loop, a turn at a time, and what it knows between turns: each step of a turn is a
    method named for what it waits on (the journal, STATUS=, the Unit signal, the supervisor's READY=1,
    a death's grace, the deadlines, the next wakeup), in the order a turn takes them."""

    def __init__(self, sd: Systemd, unit: str, invocation: str | None, judge: Judge, result: Followed,
                 journal: Follower, *, emit: Callable[[Event], None], on_record: Callable[[Record], None] | None,
                 on_progress: Callable[[Judge, float], float | None] | None,
                 batch: Callable[[], AbstractContextManager[object]], notify: bool, keep_following: bool,
                 until_verdict: bool, hot_interval: float, status: str | None) -> None:
        self.sd, self.unit, self.invocation, self.judge, self.result, self.journal = \
            sd, unit, invocation, judge, result, journal
        self.emit, self.on_record, self.on_progress, self.batch = emit, on_record, on_progress, batch
        self.notify, self.keep_following, self.until_verdict, self.hot_interval = \
            notify, keep_following, until_verdict, hot_interval
        self.status = status
        self.dirty = True
        self.fresh = False  # props as the signals left them (after one GetAll at the start)
        self.signalled = float("-inf")  # when a new STATUS= came that no line read since answers (a burst)
        self.arrived = self.arrived_ts = float("-inf")  # the last signal's arrival (monotonic, wall clock)
        # the burst's signal (wall clock); the newest line that made an event (journal ts)
        self.announced = self.answered = float("-inf")
        self.said: str | None = None  # that line's news, as the supervisor put it at the end of its STATUS= (status_line)
        self.died_at: float | None = None
        self.ready_at: float | None = None  # a notify unit went active (monotonic): the journal's ready line is due
        self.line_at: float | None = None  # a notify unit's loop wakes once, TAIL_WAIT after the last line
        self.heard = float("-inf")  # this start's last record (monotonic; set when the loop listens)
        self.pending = True
        self.unread = False  # signals whose bodies are not read yet (the Unit one, while a line is watched for)

    def listen(self, props: UnitProps) -> None:
        """Subscribe to the unit's signals and poll both fds (journal, D-Bus)."""
        self.tracked = self.sd.track(self.unit, props, self.changed)
        self.poller = select.poll()
        self.jfd, self.bfd = self.journal.fileno(), self.sd.fileno()
        self.poller.register(self.jfd, select.POLLIN)
        self.poller.register(self.bfd, select.POLLIN)
        self.heard = time.monotonic()  # journal mode's tick grows with the silence since

    def changed(self) -> None:
        """A signal of the unit's: read on the next turn, its arrival remembered (a STATUS= burst)."""
        self.dirty = True
        self.arrived, self.arrived_ts = time.monotonic(), time.time()

    def turn(self) -> bool:
        """One turn of the loop; True when it ends (a verdict, a death, one look only)."""
        if self.pending:
            self.pending = False
            self.drain()
            if self.done():
                return True
        self.sd.process()  # signals that arrived during a method call wait in sd-bus's queue, not on the fd
        self.reconnected()
        if self.dirty and self.read_status():
            return True
        self.read_unit()
        if self.supervisor_vouched():
            return True
        if self.died_at is not None:
            self.pending = True
            if time.monotonic() - self.died_at >= DEATH_GRACE:
                self.died()
                return True
        if not self.keep_following:
            self.last_look()
            return True
        now = time.time()
        supervised = self.notify and self.died_at is None and self.result.props.running  # its phase deadlines are the supervisor's
        for ev in deadline_owner.tick(self.judge, now, supervised=supervised, status=self.status):
            self.emit(ev)
        if self.done():
            return True
        due = self.on_progress(self.judge, now) if self.on_progress is not None else None
        self.wait(self.wake_at(now, supervised, due))
        return False

    def drain(self) -> None:
        """Judge every record the journal holds now; a notify unit's line that answers the STATUS= watched for
        ends the burst."""
        judge = self.judge
        with self.batch():
            for rec in self.journal.read():
                if rec.dropped:  # journald's word that it dropped lines of this start: counted, not judged
                    judge.journal_dropped(rec.dropped)
                    continue
                self.heard = time.monotonic()
                if not rec.systemd:
                    self.line_at = time.time()
                if self.on_record is not None:
                    self.on_record(rec)
                out = judge.systemd_line(rec.text, rec.ts) if rec.systemd else judge.service_line(rec.text, rec.ts)
                for ev in out:
                    self.emit(ev)
                if out and self.notify and not rec.systemd:  # the supervisor said STATUS= for such a line
                    self.answered = max(self.answered, rec.ts if rec.ts is not None else time.time())
                    self.said = news(out) or self.said
                    if self.answered >= self.announced - ANSWER_SLACK and self.told(self.status):
                        self.signalled = float("-inf")  # the one the watch waits for is here

    def told(self, text: str) -> bool:
        """Whether STATUS= `text` announces no line past those read (status_line.tells)."""
        return self.judge.verdict is not None or tells(text, self.said)

    def done(self) -> bool:
        return self.judge.verdict is not None and self.until_verdict

    def reconnected(self) -> None:
        """A new D-Bus connection (PID 1 re-executed): poll its fd instead."""
        if self.sd.fileno() != self.bfd:
            self.poller.unregister(self.bfd)
            self.bfd = self.sd.fileno()
            self.poller.register(self.bfd, select.POLLIN)

    def read_status(self) -> bool:
        """Signals came: a new STATUS= announces a line the journal may not have shown yet (watch for it,
        and look at once where the counters moved). True when that look reached the verdict."""
        self.dirty, self.unread = False, True
        if not self.fresh:  # a signal may have come before the match existed: ask once
            self.tracked.props, self.fresh = self.sd.props(self.unit), True
        text = self.tracked.status_text  # the Service signal; the Unit one is read below
        if text != self.status:
            self.status = text
            if self.answered < self.arrived_ts - ANSWER_SLACK or not self.told(text):
                self.signalled, self.announced = self.arrived, self.arrived_ts  # news of a line not read yet: watch the journal
        if self.notify and self.journal.heads.watchable and self.journal.heads.changed():
            self.drain()  # the line a STATUS= announced may be there already: out before the Unit signal is read
            if self.done():
                return True
        return False

    def read_unit(self) -> None:
        """The Unit signal's body: the start gone (fail fast, after DEATH_GRACE) or a notify unit active
        (READY=1). Held back for UNIT_SIGNAL_WAIT while the journal is watched for an announced line."""
        if self.unread and self.notify and self.keep_following and self.signalled == self.arrived \
                and time.monotonic() - self.arrived < UNIT_SIGNAL_WAIT:
            return  # watching for the announced line first: the Unit signal is read on a later turn
        if not self.unread:
            return
        self.unread = False
        now_props = self.tracked.props
        self.result.props = now_props
        gone = now_props.invocation != self.invocation or not now_props.running \
            or now_props.active_state == "deactivating"
        if gone and self.died_at is None:
            self.died_at = time.monotonic()
        if self.notify and self.ready_at is None and not gone and now_props.active_state == "active":
            self.ready_at = time.monotonic()

    def supervisor_vouched(self) -> bool:
        """A notify unit active for SUPERVISOR_GRACE (at once where journald said it dropped lines) and the
        journal still without its ready line: the supervisor's READY=1 is the verdict. True when it ends the loop."""
        if self.ready_at is None or self.judge.verdict is not None or self.died_at is not None:
            return False
        if self.keep_following and not self.judge.dropped and time.monotonic() - self.ready_at < SUPERVISOR_GRACE:
            return False
        self.drain()
        if self.judge.verdict is None:  # journald lost this start's milestones: the supervisor saw them
            self.emit(self.judge.supervisor_ready(self.result.props.status_text or "", time.time()))
        return self.done()

    def died(self) -> None:
        """The unit's death had its grace: the journal's last lines read, and the death judged if they did not."""
        self.drain()
        self.result.died = True
        if self.judge.verdict is None:
            for ev in _death(self.judge, self.result.props, self.invocation):
                self.emit(ev)

    def last_look(self) -> None:
        """One look only (keep_following=False): a notify unit whose supervisor stopped the start at its
        deadline and is stopping the server is judged in the phase both read, not "starting" until the end."""
        if self.notify and self.judge.verdict is None and FAILED_STATUS.match(self.status or ""):
            for ev in deadline_owner.tick(self.judge, time.time(), supervised=True, status=self.status):
                self.emit(ev)

    def wake_at(self, now: float, supervised: bool, due: float | None) -> float:
        """When the loop must look again with nothing on its fds (wall clock): the next deadline, the
        supervisor's grace, a notify unit's traceback tail and quiet end, a live display's next refresh."""
        if self.died_at is not None or self.dirty:
            wake = now + 0.01
        else:
            nd = deadline_owner.next_deadline(self.judge, supervised=supervised, status=self.status)
            if self.ready_at is not None:
                nd = min(nd if nd is not None else float("inf"), now + self.ready_at + SUPERVISOR_GRACE - time.monotonic())
            if self.notify:
                q = self.judge.readiness.quiet_until()
                line_at = self.line_at
                tail = line_at + TAIL_WAIT + 0.01 if line_at is not None and now < line_at + TAIL_WAIT + 0.01 else q
                wake = min(nd if nd is not None else float("inf"), q, tail, due if due is not None else float("inf"))
            else:
                wake = min(nd, now + 1.0) if nd is not None else now + 1.0
        if self.on_progress is not None and not self.notify:
            quiet = time.monotonic() - self.heard > QUIET_AFTER
            wake = min(wake, now + (PROGRESS_SILENT if quiet else PROGRESS_EVERY))
        return wake

    def wait(self, wake: float) -> None:
        """Sleep until an fd, the journal's counters or `wake`; a notify unit's counters only during a burst."""
        if self.notify:
            since = time.monotonic() - self.signalled
            # a journal with no counters here to look at (a remote one): its stream's fd wakes the loop, no burst
            burst = since < BURST_S and self.journal.heads.watchable
            tick = max(BURST_TICK, since / 4) if burst else None
            woke = _idle_notify(self.poller, self.journal, self.jfd, self.bfd, wake, tick, self.result)
            self.pending = woke in ("journal", "fd") or self.pending
        else:
            self.pending = _idle(self.poller, self.journal, self.jfd, wake, self.heard, self.hot_interval,
                                 self.result) or self.pending

    def settle(self) -> Followed:
        """After the loop: the unit's last props, and a notify unit's verdict set beside its supervisor's word."""
        result, judge = self.result, self.judge
        if self.unread:  # the loop ended (a verdict) before the last signals' bodies were read
            result.props = self.tracked.props
        if self.notify and judge.verdict is not None and judge.verdict.verdict != "healthy" and not result.lost:
            now_props = self.sd.props(self.unit)  # the journal's exit line can come before the signal of the last STATUS=
            result.props = now_props if now_props.invocation == self.invocation else result.props
        if self.notify:
            _whose_kill(judge, result.props)
            _supervisors_failure(judge, result.props)
        return result


def judge_ended(sd: Systemd, cfg: ServiceConfig | None, unit: str, props: UnitProps, end: UnitProps) -> Verdict:
    """A start judged healthy whose unit has ended since (`wait` after the end, or a kill that came while
    `up --wait-ready` still checked HTTP): this start's journal read again from its first line to its end, as
    `replay` reads it, so that both reach the one decision on how the server's life ended (judge.ending); systemd's
    D-Bus account of the end (`end`) stands in only for lines the journal does not hold yet."""
    deadline = time.monotonic() + END_LINES_WAIT
    while True:
        judge = follow(sd, cfg, unit, props, emit=lambda _ev: None, keep_following=False, until_verdict=False,
                       notify=False).judge
        facts = judge.readiness.after_ready
        if facts.result is not None or end.result in ("success", "") or time.monotonic() >= deadline:
            break
        time.sleep(END_LINES_EVERY)
    at = end.state_change_ts or time.time()
    if facts.exit is None and end.exit_line:
        judge.systemd_line(end.exit_line, at)
    if judge.readiness.after_ready.result is None and end.result not in ("success", ""):
        judge.systemd_line(f"Failed with result '{end.result}'.", at)
    return judge.finish()


def _supervisors_failure(judge: Judge, props: UnitProps) -> None:
    """The journal shows only the server's death (its exit line) where the supervisor, which read every
    line, named the failure (`STATUS=failed [cuda_oom]: …`) or stopped the start at its deadline
    (`STATUS=timed_out: no progress in phase …`): journald dropped the lines between. The supervisor's
    verdict stands, so that the two never disagree; likewise for any verdict of a start whose lines
    journald said it dropped, or that the supervisor places in a phase the journal never reached."""
    v, status = judge.verdict, props.status_text or ""
    m = FAILED_STATUS.match(status)
    if v is None or m is None or v.figures.killed == "supervisor":
        return
    only_the_end = v.cause in (Cause.EXITED, Cause.KILLED_BY_SIGNAL) and (m.group(2) not in (None, v.cause)
                                                                       or m.group(1) == "timed_out")
    phase = status_phase(status)
    elsewhere = phase is not None and phase != v.phase  # both read the same lines: the journal lacks the phase's
    # journald said it dropped lines: wherever the two disagree, the supervisor read what the journal lacks
    disagree = elsewhere or (judge.dropped and (m.group(1) != v.verdict or m.group(2) not in (None, v.cause)))
    if not (only_the_end or disagree):
        return
    kept = "the server's end" if only_the_end else f"phase {v.phase}"
    judge.readiness.verdict = v.with_(
        verdict=m.group(1), cause=m.group(2) or (v.cause if m.group(1) == v.verdict else None), phase=phase or v.phase,
        figures=v.figures.replace(verdict_source="supervisor"), evidence=(*v.evidence, f"STATUS={status}"),
        message=f"{status[m.end():]} (svcdiag supervise's verdict: the journal kept only {kept}, so "
                "journald dropped the lines that show it)")


def _whose_kill(judge: Judge, props: UnitProps) -> None:
    """A notify unit's main process killed by SIGKILL: the supervisor re-raises its child's SIGKILL, but
    only after its last STATUS= said `failed [killed_by_signal]` (PID 1 reads the notification before
    the death). Any other last word: the supervisor itself was killed (`kill -9`, `systemctl kill`), and
    SGLang was stopped with it; not the OOM killer's doing, whatever the journal's exit line suggests."""
    v = judge.verdict
    if v is None or v.cause != Cause.KILLED_BY_SIGNAL or v.figures.signal != "KILL" \
            or any("OOM killer" in e for e in v.evidence) or (props.status_text or "").startswith("failed"):
        return
    judge.readiness.verdict = v.with_(
        figures=v.figures.replace(killed="supervisor"),
        message=f"svcdiag supervise, the unit's main process, was killed by SIGKILL in phase {v.phase}; SGLang, "
                "its child, was stopped with it")


def _handle(ready: list[tuple[int, int]], journal: Follower, jfd: int) -> None:
    """The journal's fd woke the loop: new files, or a restart. (D-Bus's is read by the loop after it
    has read the journal: a signal's line is usually there already, and the signal waits ~0.1 ms.)"""
    for fd, _ in ready:
        if fd == jfd:
            journal.on_fd_event()


def tick_after(silence: float, floor: float = HOT_INTERVAL) -> float:
    """Journal mode's tick after `silence` seconds without a line of this start: TICK_SHARE of it,
    between `floor` and MAX_INTERVAL."""
    return min(MAX_INTERVAL, max(floor, silence * TICK_SHARE))


def _idle(poller: select.poll, journal: Follower, jfd: int, wake: float,
          heard: float, floor: float, result: Followed) -> bool:
    """Wait until something may have happened: an fd event, a journal append, or `wake` (wall
    clock). `heard` (monotonic) is this start's last line: the tick grows with the silence since
    (tick_after). The loop a hung start spends its life in: each tick is one poll and a few loads."""
    poll, changed, mono = poller.poll, journal.heads.changed, time.monotonic
    now = mono()
    until = now + (wake - time.time())
    while True:  # at least one poll, so that a `wake` already past cannot spin the caller
        ready = poll(max(0.0, min(until - now, tick_after(now - heard, floor))) * 1000)
        result.wakeups += 1
        if ready:
            _handle(ready, journal, jfd)
            return True
        if changed():
            return True
        now = mono()
        if now >= until:
            return False


def _idle_notify(poller: select.poll, journal: Follower, jfd: int, bfd: int, wake: float,
                 tick: float | None, result: Followed) -> str:
    """A notify unit's wait: the journal's fd, the D-Bus fd (StatusText, ActiveState, SubState
    change as the supervisor tells systemd), and the deadline `wake`: no timer otherwise. Within
    BURST_S of a new STATUS= (`tick` set), the line it announced may not be in the journal yet:
    its counters are looked at every `tick` until it is (select: poll's timeout is whole ms).
    Says what woke it: "fd", "journal" (the counters moved), "tick" (nothing new) or "wake"."""
    left = wake - time.time()
    if left <= 0:
        return "wake"
    if tick is not None:
        if journal.heads.changed():  # the line came while the signals were being read: no sleep
            return "journal"
        readable = select.select((jfd, bfd), (), (), min(left, tick))[0]
        ready = [(fd, select.POLLIN) for fd in readable]
    else:
        ready = poller.poll(None if left == float("inf") else left * 1000 + 1)
    result.wakeups += 1
    if ready:
        _handle(ready, journal, jfd)
        return "fd"
    if tick is not None:
        return "journal" if journal.heads.changed() else "tick"
    return "wake"


def _death(judge: Judge, props: UnitProps, invocation: str) -> list[Event]:
    """D-Bus saw the unit go before the journal explained it: say what systemd knows."""
    now = time.time()
    if props.invocation != invocation:
        return judge.systemd_line("Stopping: the unit was restarted by someone else (new invocation "
                                  f"{props.invocation or 'none'})", now)
    if props.result == "timeout":  # a notify unit's phase deadline, enforced by systemd
        return judge.systemd_line(f"{props.name}: start operation timed out. Terminating.", now)
    if props.active_state == "deactivating" or (props.result == "success" and props.exec_main_code == 0):
        return judge.systemd_line(f"Stopping {props.name} (stopped from outside; D-Bus state "
                                  f"{props.active_state}/{props.sub_state})", now)
    line = props.exit_line
    if line:
        return judge.systemd_line(line, now)
    return judge.systemd_line(f"Stopped {props.name} (D-Bus state {props.active_state}/{props.sub_state}, "
                              f"result {props.result})", now)


@contextmanager
def unit_lock(name: str, note: Callable[[str], None]) -> Iterator[None]:
    """One `up` per unit at a time; the second waits, then finds the unit active and attaches."""
    path = LOCK_DIR / f"{name}.lock"
    try:
        fd = open_lock(path)  # read-only where it is root's and we are not: a read-only descriptor locks too
    except (PermissionError, FileNotFoundError):  # an operator who is not root (docs/polkit.md), no lock file yet
        yield  # none may be made here: systemd's job queue still orders the starts
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            note(f"another svcdiag is starting {name}; waiting for it")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def start_unit(sd: Systemd, unit: str, *, restart: bool, job_timeout: float = 120.0,
               notify: bool = False) -> UnitProps:
    """Start (or restart) and wait for the job; the invocation id exists only after it. A notify
    unit's start job ends only at READY=1: there, wait only until the new invocation exists."""
    if notify:
        return _start_notify(sd, unit, restart=restart, timeout=job_timeout)
    job = sd.restart(unit) if restart else sd.start(unit)
    outcome = sd.wait_job(job, job_timeout)
    props = sd.props(unit)
    if outcome != "done" and not props.invocation:
        raise SvcdiagError(f"systemd could not start {unit}: job {outcome} ({props.active_state}/{props.sub_state}, "
                           f"result {props.result}); see journalctl -u {unit}")
    return props


def _start_notify(sd: Systemd, unit: str, *, restart: bool, timeout: float) -> UnitProps:
    before = sd.props(unit).invocation
    changed = [True]
    sd.watch(unit, lambda: changed.__setitem__(0, True))
    job = sd.restart(unit) if restart else sd.start(unit)
    deadline = time.monotonic() + timeout
    while True:
        sd.process()
        outcome = sd.job_result(job)
        if changed[0] or outcome is not None:
            changed[0] = False
            props = sd.props(unit)
            if props.invocation and props.invocation != before:
                return props
            if outcome is not None:
                raise SvcdiagError(f"systemd could not start {unit}: job {outcome} ({props.active_state}/"
                                   f"{props.sub_state}, result {props.result}); see journalctl -u {unit}")
        left = deadline - time.monotonic()
        if left <= 0:
            raise SvcdiagError(f"systemd did not start {unit} within {timeout:.0f} s")
        select.select([sd.fileno()], [], [], left)
