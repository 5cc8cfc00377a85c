"""One start of a unit, judged: lines → grammar → readiness. Replay and the live path share it."""

from __future__ import annotations

from svcdiag.judge.readiness import Readiness
from svcdiag.judge.unit_lines import parse_systemd
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang.causes import Cause
from svcdiag.sglang.events import Event, StopRequested
from svcdiag.sglang.grammar import LineParser

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:  # an annotation only: a replay without a config imports no config module
    from svcdiag.config.service import ServiceConfig

#: journald's record of lines it dropped (systemd.journal_formats.JOURNAL_DROPPED; judge/ imports no systemd/)
JOURNAL_DROPPED = "a596d6fe7bfa4994828e72309e95d61e"

#: seconds without a line after a traceback's final line before it is taken as complete (live)
TAIL_WAIT = 0.5
#: a systemd timeout this long before our own deadline is not ours (a notify unit's TimeoutStartSec
#: follows our deadlines; a unit written by hand has its own, 90 s unless set)
SYSTEMD_DEADLINE_SLACK = 30.0


class Judge:
    def __init__(self, cfg: ServiceConfig | None = None, *, unit: str | None = None,
                 invocation: str | None = None, total_timeout: float | None = None,
                 start_ts: float | None = None):
        self.parser = LineParser()
        self.readiness = Readiness(
            cfg.timeout if cfg else None, hybrid=cfg.hybrid if cfg else None, start_ts=start_ts,
            total_timeout=total_timeout, unit=unit or (cfg.unit if cfg else None), invocation=invocation,
            quote_events=False)
        self._clock_seen: float | None = None
        self._line_at: float | None = None
        self._hint: str | None = None

    @property
    def verdict(self) -> Verdict | None:
        return self.readiness.verdict

    def service_line(self, text: str, ts: float | None = None) -> list[Event]:
        """A journal message the server printed (it may hold several lines)."""
        if "\n" not in text:
            return self.line(text, ts)
        out: list[Event] = []
        for part in text.split("\n"):
            out += self.line(part, ts)
        return out

    def line(self, text: str, ts: float | None = None) -> list[Event]:
        """One line as printed. With no `ts`, its own prefix is the clock."""
        events = self.parser.feed_line(text, ts)
        r = self.readiness
        now = self.parser.last_ts if ts is None else ts
        out: list[Event] = []
        if now != self._clock_seen and now is not None:
            self._clock_seen = now
            # a traceback this line closed was printed before it: judged on its own time, first
            while events and events[0].ts is not None and events[0].ts < now:
                out += r.feed(events.pop(0))
            v = r.tick(now, evidence=True)  # past a deadline: overrun, unless a later milestone ends the phase
            if v is not None:  # this line's events come after the verdict (a late `Exit code: -9` still says how)
                out = out if v in out else [*out, v]
                for ev in events:
                    out += r.feed(ev)
                return out
        out += r.saw_line(text if "\r" not in text else next((s for s in reversed(text.split("\r")) if s.strip()), ""),
                          now)
        if now is not None:
            self._line_at = now
        for ev in events:
            out += r.feed(ev)
        if self.parser.version_hint != self._hint:
            self._hint = self.parser.version_hint
            if r.figures.sglang_version_source in (None, "inferred from line shapes"):
                r.set_figures(sglang_version_source="inferred from line shapes", sglang_version=self._hint)
        return out

    def serving_in(self, data: bytes, a: int, b: int) -> bool:
        """Whether the quiet lines data[a:b] may hold a serving line that moves the phase (Readiness.saw_line):
        then they are walked one by one, on each line's own clock (only before http: a paste that opens serving)."""
        return self.readiness.serving_unseen() and (data.find(b"batch", a, b) >= 0 or data.find(b'" 200', a, b) >= 0)

    def skip(self, n: int, ts_text: str | None, last_line: str, ts: float | None = None) -> None:
        """`n` quiet lines (LineParser.interesting_re) went by, exactly as `line` would have taken
        them: the parser counts them and its clock moves to `ts_text` (the last prefixed one's), and
        the stall message quotes `last_line`; `ts`: the journal's time of the last one, the clock
        then. The caller has checked that no timestamp among them reaches
        `readiness.quiet_until()`, so every tick `line` would have made changes nothing."""
        self.parser.skip(n, ts_text)
        now = self.parser.last_ts if ts is None else ts
        if now is not None:
            self._clock_seen = now
            self._line_at = now
        self.readiness.saw_line(last_line)

    def systemd_line(self, text: str, ts: float | None = None) -> list[Event]:
        """A line of systemd's about the unit ("Main process exited, code=killed, ...")."""
        out: list[Event] = []
        for done in self.parser.flush():  # the server's last traceback ends where systemd's word begins
            out += self.readiness.feed(done)
        ev = parse_systemd(text, ts, self.readiness.invocation)
        if ev is not None and ev.state == "timeout":  # systemd ended the phase at its deadline
            nd = self.readiness.next_deadline()
            if nd is not None and ts is not None and ts < nd - SYSTEMD_DEADLINE_SLACK:  # not ours: TimeoutStartSec=
                v = self.readiness.systemd_timed_out(ts)
                return out + ([v] if v is not None else [])
            return out + (self.tick(max(ts or nd, nd)) if nd is not None else [])
        if ev is None:
            return out + (self.tick(ts, evidence=True) if ts is not None else [])
        if ev.state == "exited" and ts is not None:  # died past its phase's deadline: stopped at it (svcdiag
            out += self.tick(ts, evidence=True)       # supervise enforces a notify unit's deadlines), not a crash
            if self.readiness.overrun:
                return out + self.tick(ts)
        return out + self.readiness.feed(ev)

    def stop_asked(self, by: str, ts: float) -> list[Event]:
        """A stop the caller knows was asked (svcdiag supervise forwarded `by`, SIGTERM): what systemd's `Stopping …`
        says in the journal, with who asked."""
        out: list[Event] = []
        for done in self.parser.flush():  # the server's last traceback ends where the stop begins
            out += self.readiness.feed(done)
        return out + self.readiness.feed(StopRequested(ts=ts, line=f"Stopping: svcdiag supervise was sent {by}", by=by))

    def tick(self, now: float, *, evidence: bool = False) -> list[Event]:
        """The clock moved with no line: a traceback that reached its final line a moment ago is complete
        (`evidence`: `now` is a line's time, not the clock's: Readiness.tick)."""
        out: list[Event] = []
        if self._line_at is not None and now - self._line_at >= TAIL_WAIT:
            for ev in self.parser.flush():
                out += self.readiness.feed(ev)
        v = self.readiness.tick(now, evidence=evidence)
        return [*out, v] if v is not None and v not in out else out

    def connection_lost(self, message: str, ts: float) -> Verdict:
        """The log can no longer be read (a remote host's connection died): incomplete, never failed."""
        return self.readiness.conclude_from_outside("incomplete", Cause.CONNECTION_LOST, message, ts)

    def journal_dropped(self, n: int) -> None:
        """journald's rate limit dropped `n` of this start's lines (its "Suppressed N messages" record):
        `figures.journal_dropped_lines` on the verdict, whenever the record comes (it may follow it)."""
        r = self.readiness
        total = (r.figures.journal_dropped_lines or 0) + n
        r.set_figures(journal_dropped_lines=total)
        if r.verdict is not None:
            r.verdict = r.verdict.with_(figures=r.verdict.figures.replace(journal_dropped_lines=total))

    @property
    def dropped(self) -> int:
        """How many of this start's lines journald said it dropped (0: none said)."""
        return self.readiness.figures.journal_dropped_lines or 0

    def supervisor_ready(self, status: str, ts: float) -> Verdict:
        """A notify unit is active (its supervisor said READY=1 once it judged the start healthy and
        HTTP agreed) but this start's journal never showed it ready: journald lost lines (its rate
        limit, a unit written before svcdiag set one). The supervisor saw every line: its word stands."""
        r = self.readiness
        if r.verdict is None:
            r.set_figures(verdict_source="supervisor")
            r.evidence.append(f"STATUS={status}")
            how_many = (f"journald dropped {self.dropped:,} of this start's lines (its rate limit: "
                        f"`journalctl MESSAGE_ID={JOURNAL_DROPPED}`)" if self.dropped else
                        "so journald dropped some of this start's lines "
                        f"(`journalctl MESSAGE_ID={JOURNAL_DROPPED}` says how many)")
            r.conclude_from_outside("healthy", None, "svcdiag supervise judged the start healthy and HTTP agreed "
                                    f"(READY=1: {status!r}); the journal lacks the lines that show it: {how_many}", ts)
        assert r.verdict is not None
        return r.verdict

    def finish(self) -> Verdict:
        for ev in self.parser.close():
            self.readiness.feed(ev)
        return self.readiness.finish()
