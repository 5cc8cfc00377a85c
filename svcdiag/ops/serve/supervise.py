"""`svcdiag supervise`: a `Type=notify` unit's main process, in front of SGLang.

SGLang has no sd_notify. The supervisor runs it as its child, stdout and stderr on one
pipe, and passes every byte through to its own stdout as it arrives (the journal sees what
an unwrapped unit would: long lines, bytes that are not UTF-8, tqdm's `\\r`); the same bytes,
cut into lines (each at most LINE_MAX), go to the one pipeline (svcdiag.judge.pipeline.Judge)
that `replay` and the journal follower use. A read of up to JUDGE_FIRST_MAX bytes is judged
just before it is passed through, so that a milestone's STATUS= is on its way while journald
takes the line (the line reaches journald ~0.4 ms later, `up`'s event comes ~0.4 ms sooner:
docs/benchmarks.md); a bigger one is passed through first. systemd hears
(svcdiag.systemd.notify):

- STATUS= on every milestone and phase ("loading_weights 3 s · loading weights, 139.72 GB free");
- EXTEND_TIMEOUT_USEC= so that systemd's start timeout never ends before the current phase's
  deadline (never more than `slice_s` ahead, because systemd only ever moves that timeout later);
  the unit's own TimeoutStartSec is the whole start's (notify.start_limit_s), because a
  daemon-reload forgets every extension. A phase's deadline is the supervisor's to enforce: at
  it, the child gets SIGTERM (SIGKILL STOP_GRACE_S later) and the supervisor exits
  EXIT_TIMED_OUT, the same exit code as `svcdiag up` for a timed-out start;
- READY=1 once the log says ready and the HTTP cross-check agrees; STATUS=failed [cause]: …
  when the judge says the start failed;
- after ready, the serving watch (svcdiag.judge.watch): every line still goes to the judge (a
  fatal line after ready) and the watch (batches run), and a thread asks SGLang's /health every
  `health_interval_s`. STATUS= says serving, busy, wedged, died_after_ready or killed (how the server's
  life ended is the judge's one decision, svcdiag.judge.ending, as replay's and `wait`'s); WATCHDOG=1 goes
  out only while the watch says serving or busy, WATCHDOG=trigger once it says wedged (systemd
  then restarts the unit, Restart=on-failure); each incident is recorded in the history under
  the start's invocation. A stop the supervisor was asked for (any signal it forwards: `systemctl
  stop`, `svcdiag down`, `systemctl kill`) is never an incident.

Signals TERM, INT, HUP and QUIT are forwarded to the child; the supervisor exits with the
child's status, or re-raises the signal that killed it, so systemd records what it would
have recorded for SGLang itself. The child gets PR_SET_PDEATHSIG: if the supervisor dies
(SIGKILL), so does it.

Steps before the exec are `prepare_env` (what the child's environment holds): the place
for more (credentials) later.
"""

from __future__ import annotations

import ctypes
import errno
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from svcdiag.config.service import ServiceConfig, UnitsDir
from svcdiag.judge.ending import DIED
from svcdiag.judge.pipeline import TAIL_WAIT, Judge
from svcdiag.judge.verdict import PhaseChange, Verdict
from svcdiag.judge.watch import WEDGED, Incident, ServingWatch, WatchPolicy
from svcdiag.ops.offline.replay import TRACEBACK_BYTES, run_clock
from svcdiag.ops.serve.http_check import cross_check, health
from svcdiag.ops.serve.status_line import SEP, news, status_text, verdict_status
from svcdiag.output.schema import ReadinessEvent
from svcdiag.sglang.events import Event
from svcdiag.sglang.failures import Cause
from svcdiag.systemd.notify import Notifier, slice_s, watchdog_usec

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
#: the longest line the judge is given (the bytes themselves all pass through): memory stays bounded
LINE_MAX = 64 * 1024
READ_SIZE = 256 * 1024
#: a read of output up to this size is judged before it is passed through, so that the STATUS= of a
#: milestone leaves first and the follower (`up`) is awake and watching the journal when journald
#: stamps the line; judging one read costs ~2.5 µs a line warm, ~0.4 ms for a milestone read cold
#: (the supervisor woken from a sleep). A bigger read (a flood, one huge line) is passed through
#: first: it never waits on the judge.
JUDGE_FIRST_MAX = 16 * 1024
#: a read holding any of these is judged line by line: a CR or a colour code (the judge reads each line's last
#: segment, strips colours), a traceback's opening (its lines are unprefixed, and quiet lines may end it)
_LINE_BY_LINE = (b"\r", b"\x1b", TRACEBACK_BYTES)
#: after the child exits, how long its descendants may keep the pipe open before we stop reading
DRAIN_AFTER_EXIT_S = 0.5
#: the child's own environment: what systemd gave the supervisor and the child must not act on
NOT_FOR_THE_CHILD = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES")
PR_SET_PDEATHSIG = 1
#: at a phase's deadline, how long the server has to stop after SIGTERM before SIGKILL (the unit's TimeoutStopSec)
STOP_GRACE_S = 60.0
#: the supervisor's exit status when it stopped a start at a phase's deadline (`svcdiag up`'s for timed_out)
EXIT_TIMED_OUT = 3
#: ... when `up` stopped it because another node of its multi-node start failed (`svcdiag up`'s for failed)
EXIT_STOPPED_FOR_ANOTHER = 1


#: the signals by which someone asks the server to stop (`systemctl stop`, `svcdiag down`, ^C, the kubelet,
#: `systemctl kill`): every one the supervisor forwards came from outside, so an end after it is no incident
STOP_ASKED = FORWARDED


def watch_policy(cfg: ServiceConfig) -> WatchPolicy:
    """The serving watch's cadence: the config's, else WatchPolicy's defaults (a check never outlasts its interval)."""
    d = WatchPolicy()
    interval = cfg.health_interval_s or d.interval_s
    return WatchPolicy(interval, cfg.health_failures or d.failures, min(d.timeout_s, interval))


@dataclass(frozen=True, slots=True)
class Supervised:
    """How the child ended, and the supervisor's verdict on its start."""

    verdict: Verdict | None
    returncode: int  # Popen's: negative for a signal
    #: after a healthy start: what the serving watch saw (wedged, died_after_ready, killed)
    incidents: tuple[Incident, ...] = ()

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None

    @property
    def exit_status(self) -> int:
        return self.returncode if self.returncode >= 0 else 128 + -self.returncode


def prepare_env(cfg: ServiceConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: the unit's, less what systemd meant for the main process only,
    plus [secrets] from the unit's credentials ($CREDENTIALS_DIRECTORY; svcdiag.ops.serve.secrets)."""
    env = {k: v for k, v in environ.items() if k not in NOT_FOR_THE_CHILD}
    if cfg.secrets and environ.get("CREDENTIALS_DIRECTORY"):
        from pathlib import Path

        from svcdiag.ops.serve.secrets import credentials_environment

        env.update(credentials_environment(cfg, Path(environ["CREDENTIALS_DIRECTORY"])))
    return env


class Supervisor:
    def __init__(self, cfg: ServiceConfig, argv: Sequence[str], *, out_fd: int = 1,
                 notifier: Notifier | None = None, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time):
        self.cfg, self.argv, self.out_fd = cfg, list(argv), out_fd
        self.notify = notifier or Notifier()
        self.environ = dict(os.environ if environ is None else environ)
        self.clock = clock
        self.slice = slice_s(cfg.timeout)
        self.judge = Judge(cfg, unit=cfg.unit, invocation=self.environ.get("INVOCATION_ID") or None,
                           start_ts=clock())
        self.verdict: Verdict | None = None  # the final one: the judge's, then HTTP's
        self._partial = bytearray()
        self._extended_to: float | None = None
        self._check: threading.Thread | None = None
        self._checked: Verdict | None = None
        self._check_deadline: float | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._watchdog_s = (watchdog_usec() or 0) / 2e6 or None
        self.child: subprocess.Popen[bytes] | None = None  # the server, once spawned
        self.stop_grace_s = STOP_GRACE_S  # SIGTERM to SIGKILL when a deadline stops the server (a pod: its grace)
        self._kill_at: float | None = None  # the server was told to stop at a deadline: SIGKILL then
        self._stopped = False  # ... and so the supervisor exits EXIT_TIMED_OUT
        self.policy = watch_policy(cfg)
        self.watch: ServingWatch | None = None  # after a healthy verdict
        self._health: queue.SimpleQueue[tuple[float, bool, float | None, str]] = queue.SimpleQueue()
        self._watching = threading.Event()  # set while the health thread should go on
        self._stop_asked: int | None = None  # the signal an operator (or systemd, or the kubelet) stopped it with
        self._triggered = False
        self._health_thread: threading.Thread | None = None

    # ------------------------------------------------------------ the child

    def spawn(self) -> subprocess.Popen[bytes]:
        parent = os.getpid()

        def in_child() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # the supervisor died before prctl: do not outlive it
                os._exit(1)
            for sig in FORWARDED:
                signal.signal(sig, signal.SIG_DFL)

        return subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=prepare_env(self.cfg, self.environ), preexec_fn=in_child,  # noqa: PLW1509 (no thread yet)
                                bufsize=0)

    def run(self) -> Supervised:
        self.notify.status(f"starting {self.cfg.name}")
        self._extend(self.clock())
        child = self.child = self.spawn()
        wake_sig_r, wake_sig_w = os.pipe()
        os.set_blocking(wake_sig_r, False)
        os.set_blocking(wake_sig_w, False)
        old_wakeup = signal.set_wakeup_fd(wake_sig_w, warn_on_full_buffer=False)

        def forward(sig: int, _frame: object) -> None:
            if sig in STOP_ASKED and self._stop_asked is None:
                self._stop_asked = sig
            self._forward(child, sig)

        old = {sig: signal.signal(sig, forward) for sig in FORWARDED}
        old_chld = signal.signal(signal.SIGCHLD, lambda *_: None)  # its wakeup byte ends the poll
        assert child.stdout is not None
        pipe = child.stdout.fileno()
        os.set_blocking(pipe, False)
        poller = select.poll()
        for fd in (pipe, wake_sig_r, self._wake_r):
            poller.register(fd, select.POLLIN)
        exited_at: float | None = None
        try:
            while True:
                now = self.clock()
                timeout = self._next_wake(now)
                if exited_at is not None:
                    timeout = min(timeout, max(0.0, exited_at + DRAIN_AFTER_EXIT_S - time.monotonic()))
                ready = poller.poll(None if timeout == float("inf") else max(0, int(timeout * 1000) + 1))
                self._tell_stop()  # before the lines the stop makes SGLang print: as systemd's `Stopping …` is
                eof = False
                for fd, _ in ready:
                    if fd == pipe:
                        eof = self._pump(pipe)
                    else:
                        _drain_fd(fd)
                self._on_time(self.clock())
                self._start_check()
                self._after_wake(child)
                if exited_at is None and child.poll() is not None:
                    exited_at = time.monotonic()
                if eof:
                    poller.unregister(pipe)
                    if exited_at is None:
                        child.wait()
                        exited_at = time.monotonic()
                    break
                if exited_at is not None and time.monotonic() - exited_at >= DRAIN_AFTER_EXIT_S:
                    break
        finally:
            self._watching.clear()
            if self._health_thread is not None:  # it writes to the wake pipe: never after that is closed
                self._health_thread.join(self.policy.timeout_s + 1.0)
            for sig, handler in old.items():
                signal.signal(sig, handler)
            signal.signal(signal.SIGCHLD, old_chld)
            signal.set_wakeup_fd(old_wakeup)
            for fd in (wake_sig_r, wake_sig_w, self._wake_r, self._wake_w):
                os.close(fd)
            if child.poll() is None:  # our own failure: never leave the server running unwatched
                child.terminate()
                child.wait()
        self._flush_partial()
        return self._ended(child.returncode)

    def _tell_stop(self) -> None:
        """A stop the supervisor was asked for after ready (a signal it forwards: `systemctl stop`, `svcdiag down`, the
        kubelet) told to the judge once, in the words systemd's journal has for it, so that it decides as `replay`
        does."""
        v = self.judge.verdict
        if self._stop_asked is None or self._stop_told or v is None or v.verdict != "healthy":
            return  # (before ready, the child's end says it: a start stopped is judged by its exit)
        self._stop_told = True
        self.judge.stop_asked(signal.Signals(self._stop_asked).name, self.clock())

    def _forward(self, child: subprocess.Popen[bytes], sig: int) -> None:
        """A signal the supervisor got, passed on to the child; a SIGTERM that `up` sent with a
        reason (another node of a multi-node start failed: svcdiag.systemd.stop_reason) is said."""
        if sig == signal.SIGTERM and self._stopped_for is None:
            from svcdiag.systemd import stop_reason

            self._stopped_for = stop_reason.read(self.cfg.unit, self.environ.get("INVOCATION_ID"))
            if self._stopped_for:
                self.notify.status(f"stopping: {self._stopped_for}")
        try:
            os.kill(child.pid, sig)
        except ProcessLookupError:
            pass

    def _after_wake(self, child: subprocess.Popen[bytes]) -> None:
        """Each turn of the loop, after the judge's: nothing here (a container's supervisor reaps
        orphans and stops a start that failed; svcdiag.ops.containers.container)."""

    # ------------------------------------------------------------ bytes in, bytes out

    def _pump(self, pipe: int) -> bool:
        """Pass through what the pipe holds; True at end of file."""
        while True:
            try:
                chunk = os.read(pipe, READ_SIZE)
            except BlockingIOError:
                return False
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                raise
            if not chunk:
                return True
            judging = self.verdict is None or self._check is not None
            first = judging and len(chunk) <= JUDGE_FIRST_MAX
            try:
                if first:
                    self._judge(chunk)
            finally:  # the bytes pass through even if judging them failed
                _write_all(self.out_fd, chunk)
            if judging and not first:
                self._judge(chunk)
            elif not judging and self.watch is not None:  # after ready: the watch reads every line
                self._lines(chunk)
            self._start_check()

    def _judge(self, chunk: bytes) -> None:
        with self.notify.held():  # one STATUS= for what this read brought
            self._lines(chunk)

    def _lines(self, chunk: bytes) -> None:
        start = 0
        if self._partial:  # the line cut at the previous read's end
            nl = chunk.find(b"\n")
            if nl < 0:
                self._partial += chunk[: max(0, LINE_MAX - len(self._partial))]
                return
            self._partial += chunk[: max(0, min(nl, LINE_MAX - len(self._partial)))]
            piece, self._partial = bytes(self._partial), bytearray()
            self._feed(piece.decode("utf-8", "replace"))
            start = nl + 1
        last = chunk.rfind(b"\n")
        if last >= start:
            self._whole(b"\n" + chunk[start:last + 1], 0, last - start + 1)
            start = last + 1
        rest = chunk[start:]
        if rest:
            self._partial += rest[:LINE_MAX]  # beyond LINE_MAX, a line's bytes pass through unjudged

    def _whole(self, data: bytes, start: int, end: int) -> None:
        """The whole lines data[start + 1:end] (data[start] and data[end] are newlines), as `replay`'s
        fast path takes them: the ones a handler might take (LineParser.interesting_re) line by line,
        the runs of quiet lines between them (decode batches, access lines) in bulk (`_quiet`). A read
        holding a CR, a colour code or a traceback's opening goes line by line."""
        parser = self.judge.parser
        if self.judge.verdict is not None:  # after the verdict, every line: how the server's life ends, its batches
            self._each(data, start + 1, end)
            return
        if any(data.find(w, start, end) >= 0 for w in _LINE_BY_LINE):
            self._each(data, start + 1, end)
            return
        a = start + 1
        for m in parser.interesting_re(data.isascii()).finditer(data, start, end):
            s = m.start() + 1
            if s > a:
                self._quiet(data, a, s - 1)
            e = data.find(b"\n", s, end)
            e = end if e < 0 else e
            self._feed(data[s:min(e, s + LINE_MAX)].decode("utf-8", "replace"))
            a = e + 1
        if a < end:
            self._quiet(data, a, end)

    def _quiet(self, data: bytes, a: int, b: int) -> None:
        """Quiet lines data[a:b]: applied at once (Judge.skip) at this moment's clock, unless a
        traceback is open or the clock has reached a deadline or a failure's grace (then a line may
        end the start: each is judged)."""
        judge = self.judge
        if judge.verdict is not None:  # the verdict came earlier in this read: the rest is read after ready
            self._each(data, a, b)
            return
        now = self.clock()
        if judge.parser.quiet_ok() and now < judge.readiness.quiet_until() - 1e-3 \
                and not judge.serving_in(data, a, b) and (clock := run_clock(data, a, b)) is not None:
            ts_text, last, _ = clock
            judge.skip(data.count(b"\n", a, b) + 1, ts_text, last[:LINE_MAX].decode("utf-8", "replace"), ts=now)
            self._tail_due = now + TAIL_WAIT + 0.01
            return
        self._each(data, a, b)

    def _each(self, data: bytes, a: int, b: int) -> None:
        """The lines data[a:b], one by one."""
        while a <= b:
            e = data.find(b"\n", a, b)
            e = b if e < 0 else e
            self._feed(data[a:min(e, a + LINE_MAX)].decode("utf-8", "replace"))
            a = e + 1

    def _flush_partial(self) -> None:
        if self._partial:
            self._feed(bytes(self._partial).decode("utf-8", "replace"))
            self._partial = bytearray()

    def _feed(self, text: str) -> None:
        if self.judge.verdict is not None:
            self._watch_line(text)
            return
        now = self.clock()
        self._tail_due = now + TAIL_WAIT + 0.01  # a traceback this line ends is complete after TAIL_WAIT
        self._on_events(self.judge.line(text, now), now)

    def _watch_line(self, text: str) -> None:
        """A line after ready (from the ready line on, the HTTP cross-check's time included): a batch is progress
        for the watch; the judge reads it for how the server's life ends (judge.ending), as `replay` does."""
        now = self.clock()
        if self.watch is not None:
            self.watch.line(now, text)
        self._tail_due = now + TAIL_WAIT + 0.01
        self.judge.line(text, now)
        self._judge_after_ready(now)

    def _judge_after_ready(self, now: float) -> None:
        """The judge read a line that ends the server (a crash's fatal line, a process killed) while it still runs:
        the watch's fatal line."""
        e = self.judge.readiness.ending
        if self.watch is None or e is None or not e.incident or self.watch.fatal is not None:
            return
        self.watch.fatal_line(now, e.cause, e.message, e.evidence[-4:])
        self.notify.status(f"{self.watch_status(now)} · the log: {e.message}")

    def _on_events(self, events: list[Event], now: float) -> None:
        """What one line (or tick) made of the start: a new phase extends systemd's timeout, the
        news goes to STATUS= in one message, a verdict ends the judging."""
        if not events:
            return
        verdict = None
        for ev in events:
            if isinstance(ev, Verdict):
                verdict = ev
            elif isinstance(ev, PhaseChange):
                self._phase_since = ev.ts if ev.ts is not None else now
                self._extend(now, force=True)
        self._news = news(events) or self._news
        if verdict is not None:
            self._on_verdict(verdict, now)
        else:
            self.notify.status(status_text(self.judge, self._news, now, self._phase_since))

    def _on_verdict(self, v: Verdict, now: float) -> None:
        if v.verdict != "healthy":
            self.verdict = v
            self.notify.status(verdict_status(v))
            if v.verdict == "timed_out":
                self._stop_child(now)
            return
        if self.cfg.node_rank:  # a worker node (rank ≥ 1) serves no HTTP: its log's verdict is final, as in `up`
            self.verdict = v
            self.notify.ready(verdict_status(v).replace("HTTP agrees", f"node {self.cfg.node_rank}: no HTTP of its own"))
            self._publish(v)
            return
        self.notify.status(status_text(self.judge, "HTTP cross-check", now, self._phase_since))
        self._check_deadline = now + self.cfg.timeout["http_check"] + 1.0
        self._extend(now, force=True)
        self.notify.flush()  # systemd hears of the ready line now, not after the new thread's first GIL slice
        self._check = threading.Thread(target=self._cross_check, args=(v,), daemon=True)

    def _stop_child(self, now: float) -> None:
        """A phase's deadline passed: stop the server as systemd would (SIGTERM, SIGKILL after the grace)."""
        self._stopped = True
        self._signal_child(signal.SIGTERM)
        self._kill_at = now + self.stop_grace_s

    def _signal_child(self, sig: int) -> None:
        if self.child is not None and self.child.poll() is None:
            try:
                os.kill(self.child.pid, sig)
            except ProcessLookupError:
                pass

    def _start_check(self) -> None:
        """The HTTP cross-check's thread starts once the ready line has been passed through: a new
        thread takes the GIL for a while, and the journal must not wait for the line meanwhile."""
        if self._check is not None and self._check.ident is None:
            self._check.start()

    def _cross_check(self, v: Verdict) -> None:
        self._checked = cross_check(v, self.cfg.host, self.cfg.port, self.cfg.timeout["http_check"])
        os.write(self._wake_w, b"!")

    def _deadline(self) -> float | None:
        """The end of what is being waited for now: the current phase, or the HTTP cross-check.
        After a failed verdict, the phase's deadline stands, as it would for an unwrapped server."""
        if self._check is not None:
            return self._check_deadline
        if self.judge.verdict is None:
            self._phase_deadline = self.judge.readiness.next_deadline()
            return self._phase_deadline
        if self.verdict is not None and self.verdict.verdict == "healthy":
            return None
        return self._phase_deadline

    def _extend(self, now: float, *, force: bool = False) -> None:
        """Keep systemd's start timeout at min(now + slice, the current deadline): it can only
        move later, so it never gets more than one slice ahead of a deadline that may come sooner."""
        deadline = self._deadline()
        if deadline is None:
            return
        target = min(now + self.slice, deadline)
        if target <= now:
            return  # the deadline has passed: the timeout systemd holds, now due, enforces it
        due = self._extended_to is None or self._extended_to - now <= self.slice / 2
        if (force or due) and (self._extended_to is None or target > self._extended_to):
            self.notify.extend(target - now)
            self._extended_to = target

    def _next_wake(self, now: float) -> float:
        """Seconds until the loop has something to do with no input: an extension, a deadline,
        a traceback's tail, the watchdog. Nothing at all while a ready server runs unwatched."""
        wakes = [float("inf") if self._kill_at is None else self._kill_at]
        if self.verdict is not None and self.verdict.verdict == "healthy":
            if self._watchdog_s:
                wakes.append(self._watchdog_next)
            if self._tail_due is not None:
                wakes.append(self._tail_due)
            return max(0.0, min(wakes) - now)
        if self._extended_to is not None:
            wakes.append(self._extended_to - self.slice / 2)
        d = self._deadline()
        if d is not None:
            wakes.append(d)
        wakes.append(self.judge.readiness.quiet_until())
        if self._tail_due is not None:
            wakes.append(self._tail_due)
        return max(0.0, min(wakes) - now)

    def _on_time(self, now: float) -> None:
        if self._kill_at is not None and now >= self._kill_at:
            self._kill_at = None
            self._signal_child(signal.SIGKILL)
        if self._check is not None and self._checked is not None:
            self._check.join()
            self._check = None
            v, self._checked = self._checked, None
            self.verdict = v
            if v.verdict == "healthy":
                self.notify.ready(verdict_status(v))
                self._publish(v)
                self._watchdog_next = now + (self._watchdog_s or 0)
                self._start_watch(v, now)
            else:
                self.notify.status(verdict_status(v))
            return
        if self.judge.verdict is None:
            if self._tail_due is not None and now >= self._tail_due:
                self._tail_due = None
            self._on_events(self.judge.tick(now), now)
        if self.verdict is None or self.verdict.verdict != "healthy":
            self._extend(now)
            return
        if self.watch is not None:
            self._on_watch(now)
        if self._watchdog_s and now >= self._watchdog_next:
            self._watchdog_next = now + self._watchdog_s
            if self.watch is None or self.watch.healthy:
                self.notify.watchdog()

    # ------------------------------------------------------------ after ready: the serving watch

    def _start_watch(self, v: Verdict, now: float) -> None:
        """The start is healthy: record it (under systemd: a restart is a start nobody's `up` waits for),
        then watch the server while it serves."""
        self.watch = ServingWatch(self.policy, now)
        self._oom_kills_at_ready = _oom_kills()
        self._record_start(v)
        if self.cfg.node_rank:  # a worker node serves no HTTP: its log and its process are watched
            return
        self._watching.set()
        self._health_thread = threading.Thread(target=self._ask_health, daemon=True, name="svcdiag-health")
        self._health_thread.start()

    def watch_status(self, now: float) -> str:
        """STATUS= after ready: the start's verdict and the watch's word while it serves; the incident after."""
        assert self.watch is not None
        if self.watch.healthy and self.verdict is not None:
            return f"{verdict_status(self.verdict)}{SEP}{self.watch.status(now)}"
        return self.watch.status(now)

    def _ask_health(self) -> None:
        """The health thread: /health every interval, each answer queued for the loop (it never blocks the loop)."""
        p = self.policy
        n = 0
        while self._watching.wait(0) and not _sleep_unless_cleared(self._watching, p.interval_s):
            path, n = p.path(n), n + 1
            ok, latency, detail = health(self.cfg.host, self.cfg.port, p.timeout_s, path)
            detail = detail if path == "/health" else f"{detail} ({path})"
            self._health.put((self.clock(), ok, latency, detail))
            if not self._watching.is_set():
                return
            try:
                os.write(self._wake_w, b"h")
            except OSError:
                return  # the loop has ended

    def _on_watch(self, now: float) -> None:
        assert self.watch is not None
        if self._tail_due is not None and now >= self._tail_due:  # a traceback after ready is complete
            self._tail_due = None
            self.judge.tick(now)
            self._judge_after_ready(now)
        said = False
        while True:
            try:
                ts, ok, latency, detail = self._health.get_nowait()
            except queue.Empty:
                break
            if self._stop_asked is not None:
                continue  # stopping: /health failing now is the stop's
            said = True
            inc = self.watch.health(ts, ok, latency, detail)
            if inc is not None:
                self._incident(inc, now)
        if said and not self._triggered:
            self.notify.status(self.watch_status(now))

    def _incident(self, inc: Incident, now: float) -> None:
        """Say it (STATUS=), record it under the start, and for wedged, have systemd act (WATCHDOG=trigger)."""
        assert self.watch is not None
        status = self.watch_status(now)
        acts = inc.kind == WEDGED and bool(self._watchdog_s)
        action = self._action(inc, acts)
        self._record_incident(inc, action)
        if acts and not self._triggered:
            self._triggered = True
            self._watching.clear()
            self.notify.watchdog_trigger(f"{status} → systemd restarts it")
        else:
            self.notify.status(status)

    def _action(self, inc: Incident, acts: bool) -> str | None:
        """What is done about an incident: systemd restarts a wedged server (WATCHDOG=trigger, Restart=on-failure)."""
        return "restart (WATCHDOG=trigger)" if acts else None

    def metrics_state(self, now: float) -> dict[str, Any]:
        """This start as a textfile state (svcdiag.output.textfile): /metrics renders it with the same names."""
        r = self.judge.readiness
        v = self.verdict if self._check is None else None
        state: dict[str, Any] = {
            "unit": self.cfg.unit, "config": self.cfg.name, "invocation": self.environ.get("INVOCATION_ID") or None,
            "phase": r.phase, "verdict": v.verdict if v is not None else "pending",
            "cause": v.cause if v is not None else None, "started": r.started, "phase_since": r.phase_since,
            "updated": now, "phase_seconds": dict(r.phase_seconds),
            "figures": {k: getattr(r.figures, k, None) for k in ("kv_tokens", "max_total_num_tokens",
                                                                 "max_running_requests", "context_len")}}
        if v is not None and v.figures.startup_s is not None:
            state["figures"]["startup_s"] = v.figures.startup_s
        w = self.watch
        if w is not None:
            incidents: dict[str, int] = {}
            for inc in w.incidents:
                incidents[inc.kind] = incidents.get(inc.kind, 0) + 1
            state.update(watch=w.state, incidents=incidents, health_checks=w.checks, health_failures=w.failed_checks,
                         health_latency_s=w.last_latency_s)
        return state

    def _record_start(self, v: Verdict) -> None:
        """Under systemd with a watchdog, the start goes in the history: a restart is a start nobody's `up`
        waits for (`up` records the same invocation once)."""
        if not self.environ.get("INVOCATION_ID") or not self.cfg.watchdog_s:
            return
        from svcdiag.ops.host.history import record_start
        from svcdiag.output.publish import verdict_record

        _, why = record_start(self.cfg, v, "supervise")
        _warn(why)
        self._textfile(verdict_record(v, self.cfg.name))

    def _publish(self, v: Verdict) -> None:
        """Under systemd, after READY=1: the healthy verdict in the journal, where `svcdiag status` and
        `top` read it instead of judging the start's lines again (svcdiag.systemd.journal.publish_verdict)."""
        if not self.environ.get("INVOCATION_ID"):
            return
        from svcdiag.output.publish import verdict_record
        from svcdiag.systemd.journal import publish_verdict

        try:
            publish_verdict(verdict_record(v, self.cfg.name).to_json())
        except Exception:  # a courtesy to readers: the server must keep being watched
            pass
        threading.Thread(target=self._publish_milestones, args=(self.environ["INVOCATION_ID"],), daemon=True,
                         name="svcdiag-milestones").start()

    def _publish_milestones(self, invocation: str) -> None:
        """Off the loop: the start's journal judged once systemd's `Started` line is in it, for `logs --milestones`
        (svcdiag.ops.serve.milestones)."""
        from svcdiag.ops.serve import milestones

        try:
            milestones.publish(self.cfg, invocation)
        except Exception:  # a courtesy to readers, as the verdict's
            pass

    def _textfile(self, rec: ReadinessEvent) -> None:
        """$SVCDIAG_TEXTFILE in the unit's [env]: a restarted start and its incidents reach node_exporter too."""
        path = self.environ.get("SVCDIAG_TEXTFILE")
        if not path:
            return
        from svcdiag.errors import SvcdiagError
        from svcdiag.output.textfile import Textfile

        try:
            Textfile(path).publish(rec)
        except (OSError, SvcdiagError) as e:
            _warn(f"textfile {path}: {e}")

    def incident_record(self, inc: Incident, action: str | None) -> ReadinessEvent:
        """The incident as an event (docs/events.md `incident`): `verdict` wedged or failed (the server is gone: died,
        or killed, the start itself staying healthy), its cause (killed: host_oom or killed_by_signal)."""
        return ReadinessEvent(event="incident", ts=inc.ts, unit=self.cfg.unit, config=self.cfg.name,
                              invocation=self.environ.get("INVOCATION_ID") or None, phase="ready",
                              verdict=WEDGED if inc.kind == WEDGED else "failed",
                              cause=Cause.DIED_AFTER_READY if inc.kind == DIED else inc.cause, message=inc.message,
                              data={"kind": inc.kind, "since": round(inc.since, 3), "evidence": list(inc.evidence),
                                    "action": action})

    def _record_incident(self, inc: Incident, action: str | None) -> None:
        """Under systemd: in the history, under the start's invocation, and in the journal (`svcdiag events`)."""
        if not self.environ.get("INVOCATION_ID"):
            return
        from svcdiag.ops.host.history import record_incident
        from svcdiag.systemd.journal import JournalSink

        _warn(record_incident(self.cfg.name, self.environ.get("INVOCATION_ID"), inc.to_json(), action))
        self._textfile(self.incident_record(inc, action))
        try:
            JournalSink(warn=lambda _m: None).publish(self.incident_record(inc, action))
        except Exception:  # the journal's record is a courtesy: the server must keep being watched
            pass

    _watchdog_next: float = 0.0
    _stopped_for: str | None = None  # why `up` stopped this start (another node failed), when it said
    _stop_told = False  # the stop asked was told to the judge (as systemd's `Stopping …`)
    _oom_kills_at_ready: int | None = None  # the cgroup's OOM kills when the start was healthy (None: unreadable)
    _phase_deadline: float | None = None
    _tail_due: float | None = None
    _phase_since: float | None = None
    _news: str | None = None

    def _ended(self, returncode: int) -> Supervised:
        """The child is gone: say so in the words systemd would use, then hand back how it ended."""
        now = self.clock()
        if self.verdict is None and self.judge.verdict is None:
            self.judge.systemd_line(_exit_line(returncode), now)
        if self.verdict is None:
            self.verdict = self.judge.verdict
        if self._stopped_for:  # a failed start, though this node's own was fine: systemd records it as one
            self.notify.status(f"failed: {self._stopped_for}")
            print(f"svcdiag: {self._stopped_for}", file=sys.stderr, flush=True)
            return Supervised(self.verdict, EXIT_STOPPED_FOR_ANOTHER)
        if self.verdict is not None and self.verdict.verdict != "healthy":
            self.notify.status(verdict_status(self.verdict))
        elif self.verdict is not None:
            self._died_after_ready(returncode, now)
        incidents = tuple(self.watch.incidents) if self.watch is not None else ()
        return Supervised(self.verdict, EXIT_TIMED_OUT if self._stopped else returncode, incidents)

    def _died_after_ready(self, returncode: int, now: float) -> None:
        """The server ended after a healthy start: its end told to the judge in systemd's words (a stop asked, the
        OOM killer where the unit's cgroup counted a kill since ready, the exit status), and the judge's one decision
        (judge.ending, as `replay` and `wait` take it) says whether that is an incident, and which."""
        self._tell_stop()
        if self._oom_kills_at_ready is not None and (_oom_kills() or 0) > self._oom_kills_at_ready:
            self.judge.systemd_line(f"{self.cfg.unit}: A process of this unit has been killed by the OOM killer.", now)
        self.judge.systemd_line(_exit_line(returncode), now)
        if self.watch is None or self._triggered:
            self.notify.status(f"stopped: the server exited ({_how(returncode)}) after it was ready")
            return
        ending = self.judge.readiness.ending
        inc = self.watch.ended(now, ending, _how(returncode))
        if inc is None:
            who = ending.by if ending is not None and ending.by else "nobody said"
            self.notify.status(f"stopped: the server exited ({_how(returncode)}) after it was ready ({who}: "
                               "not an incident)")
            return
        self._incident(inc, now)


def _warn(why: str | None) -> None:
    """A history the supervisor cannot write: one line on its stderr (the unit's journal), the server unharmed."""
    if why:
        os.write(2, f"svcdiag supervise: warning: {why}\n".encode())


def _sleep_unless_cleared(flag: threading.Event, seconds: float) -> bool:
    """Sleep `seconds`; True if `flag` was cleared meanwhile (checked every 0.2 s at most)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(0.2, left))
        if not flag.is_set():
            return True
    return not flag.is_set()


def _exit_line(returncode: int) -> str:
    """The child's end in systemd's words for a main process's (`Main process exited, code=killed, status=9/KILL`)."""
    if returncode < 0:
        sig = -returncode
        return f"Main process exited, code=killed, status={sig}/{signal.Signals(sig).name[3:]}"
    return f"Main process exited, code=exited, status={returncode}/{'SUCCESS' if returncode == 0 else 'FAILURE'}"


def _oom_kills() -> int | None:
    """How many processes of this unit's cgroup the kernel's OOM killer has killed (cgroup v2's memory.events
    `oom_kill`), or None where it cannot be read: the supervisor's view of systemd's `… killed by the OOM killer`."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next((line.split("::", 1)[1].strip() for line in f if line.startswith("0::")), None)
        if path is None:
            return None
        with open(f"/sys/fs/cgroup{path}/memory.events") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("oom_kill ")), None)
    except (OSError, ValueError, IndexError):
        return None


def _how(returncode: int) -> str:
    return f"status {returncode}" if returncode >= 0 else f"killed by {signal.Signals(-returncode).name}"


def _drain_fd(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        except BrokenPipeError:
            return  # nobody reads our stdout any more (journald restarting): the server keeps running
        view = view[n:]


def supervise(units: UnitsDir, name: str, argv: Sequence[str], node_rank: int | None = None) -> Supervised:
    """Run `argv` as config `name`'s server (its node `node_rank`'s) under supervision, to its end."""
    cfg = units.load(name)
    if node_rank is not None:
        from svcdiag.errors import SvcdiagError

        nodes = {n.node_rank: n for n in cfg.node_configs() if n.node_rank is not None}
        if node_rank not in nodes:
            raise SvcdiagError(f"supervise --node-rank {node_rank}: {name} has no such node "
                               f"({'ranks ' + ', '.join(map(str, sorted(nodes))) if nodes else 'it is not multi-node'})")
        cfg = nodes[node_rank]
    return Supervisor(cfg, argv).run()


def exit_like(result: Supervised) -> int:
    """End this process as the child ended: re-raise its signal, else its exit status."""
    sig = result.signal
    if sig is not None and sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    elif sig == signal.SIGKILL:
        os.kill(os.getpid(), sig)
    return result.exit_status
