"""The live path: start a unit, follow exactly this start's journal, and return a verdict
the moment the evidence is there.

One poll loop waits on three things at once: the journal's fd (rotation, journald
restarts), the D-Bus fd (the unit leaving activating/active: fail fast), and, while the
start is in progress, a 5 ms tick that looks at the journal files' entry counters (see
journal.py). Deadlines come from the readiness machine, on the wall clock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.judge.pipeline import Judge
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang.events import Event
from svcdiag.systemd.dbus import Systemd, UnitProps
from svcdiag.systemd.journal import Follower
from svcdiag.systemd.journal_formats import Record

#: the tick while lines flow, and after QUIET_AFTER seconds without one. A wakeup costs
#: ~25 µs of CPU on a VM whatever it does, so a silent (hung) start ticks 50 times a
#: second, not 200: ≤ 0.5 % of a core, while the line after a silence waits ≤ 20 ms.
HOT_INTERVAL = 0.005
IDLE_INTERVAL = 0.020
QUIET_AFTER = 2.0
#: after D-Bus says the unit died, how long the journal gets to deliver the lines that explain it
DEATH_GRACE = 0.12
#: how often a live display hears where the start is, when nothing else wakes the loop
PROGRESS_EVERY = 0.25
LOCK_DIR = Path(os.environ.get("SVCDIAG_LOCK_DIR", "/run/svcdiag"))


@dataclass
class Followed:
    judge: Judge
    props: UnitProps
    died: bool = False

    @property
    def verdict(self) -> Verdict | None:
        return self.judge.verdict


def follow(sd: Systemd, cfg: ServiceConfig | None, unit: str, props: UnitProps, *,
           emit: Callable[[Event], None], keep_following: bool = True, total_timeout: float | None = None,
           on_record: Callable[[Record], None] | None = None, until_verdict: bool = True,
           hot_interval: float = HOT_INTERVAL,
           on_progress: Callable[[Judge, float], None] | None = None) -> Followed:
    """Judge invocation `props.invocation` of `unit`, from its first line, until a verdict
    (or, with keep_following=False, until the journal has nothing more to say now).
    `on_progress` is called on every turn of the loop, at least every PROGRESS_EVERY s."""
    invocation = props.invocation
    start = props.inactive_exit_ts or props.state_change_ts or time.time()
    judge = Judge(cfg, unit=unit, invocation=invocation, total_timeout=total_timeout, start_ts=start)
    result = Followed(judge, props)
    journal = Follower(unit, invocation)
    dirty = True

    def changed() -> None:
        nonlocal dirty
        dirty = True

    sd.watch(unit, changed)
    poller = select.poll()
    jfd, bfd = journal.fileno(), sd.fileno()
    poller.register(jfd, select.POLLIN)
    poller.register(bfd, select.POLLIN)
    died_at: float | None = None

    def drain() -> None:
        for rec in journal.read():
            if on_record is not None:
                on_record(rec)
            out = judge.systemd_line(rec.text, rec.ts) if rec.systemd else judge.service_line(rec.text, rec.ts)
            for ev in out:
                emit(ev)

    def done() -> bool:
        return judge.verdict is not None and until_verdict

    pending = True
    last_append = time.monotonic()
    try:
        while True:
            if pending:
                pending = False
                drain()
                if done():
                    break
            sd.process()  # signals that arrived during a method call wait in sd-bus's queue, not on the fd
            if dirty:
                dirty = False
                now_props = sd.props(unit)
                result.props = now_props
                gone = now_props.invocation != invocation or not now_props.running \
                    or now_props.active_state == "deactivating"
                if gone and died_at is None:
                    died_at = time.monotonic()
            if died_at is not None:
                pending = True
                if time.monotonic() - died_at >= DEATH_GRACE:
                    drain()
                    result.died = True
                    if judge.verdict is None:
                        for ev in _death(judge, result.props, invocation):
                            emit(ev)
                    break
            if not keep_following:
                break
            now = time.time()
            for ev in judge.tick(now):
                emit(ev)
            if done():
                break
            if on_progress is not None:
                on_progress(judge, now)
            if died_at is not None or dirty:
                wake = now + 0.01
            else:
                nd = judge.readiness.next_deadline()
                wake = min(nd, now + 1.0) if nd is not None else now + 1.0
            if on_progress is not None:
                wake = min(wake, now + PROGRESS_EVERY)
            quiet = time.monotonic() - last_append > QUIET_AFTER
            pending = _idle(poller, journal, sd, jfd, bfd, wake, IDLE_INTERVAL if quiet else hot_interval) or pending
            if pending:
                last_append = time.monotonic()
    finally:
        journal.close()
    return result


def _idle(poller: select.poll, journal: Follower, sd: Systemd, jfd: int, bfd: int, wake: float,
          hot_interval: float) -> bool:
    """Wait until something may have happened: an fd event, a journal append, or `wake`.
    The loop a hung start spends its life in, so each tick does as little as it can."""
    poll, changed, clock = poller.poll, journal.heads.changed, time.time
    ms = hot_interval * 1000
    while True:
        ready = poll(ms)
        if ready:
            for fd, _ in ready:
                if fd == jfd:
                    journal.on_fd_event()
                elif fd == bfd:
                    sd.process()
            return True
        if changed():
            return True
        if clock() >= wake:
            return False


def _death(judge: Judge, props: UnitProps, invocation: str) -> list[Event]:
    """D-Bus saw the unit go before the journal explained it: say what systemd knows."""
    now = time.time()
    if props.invocation != invocation:
        return judge.systemd_line("Stopping: the unit was restarted by someone else (new invocation "
                                  f"{props.invocation or 'none'})", now)
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
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    path = LOCK_DIR / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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


def start_unit(sd: Systemd, unit: str, *, restart: bool, job_timeout: float = 120.0) -> UnitProps:
    """Start (or restart) and wait for the job; the invocation id exists only after it."""
    job = sd.restart(unit) if restart else sd.start(unit)
    outcome = sd.wait_job(job, job_timeout)
    props = sd.props(unit)
    if outcome != "done" and not props.invocation:
        raise SvcdiagError(f"systemd could not start {unit}: job {outcome} ({props.active_state}/{props.sub_state}, "
                           f"result {props.result}); see journalctl -u {unit}")
    return props
