"""After a healthy start: is the server still serving? The serving watch (pure: no I/O, no clock).

svcdiag judged the start; operators then run the server for weeks. The supervisor keeps feeding
this machine what it sees: every line of the server's log (a batch scheduled is progress; a
fatal line the judge reads after ready, a crash or a kill (svcdiag.judge.ending), is a fault) and each answer of
SGLang's `/health`, asked every `interval_s`. It says one of:

- `serving`: /health answers;
- `busy`: /health has failed `failures` times in a row, but the log still shows batches being
  scheduled since the first of those failures. A loaded server answers /health slowly (it
  generates a token behind every queued request); restarting it would restart-loop a healthy
  server, so busy is left alone, and systemd's watchdog is still fed;
- `wedged`: /health has failed `failures` times in a row while the process lives, AND the log
  has been silent of progress since the first failure, or printed a fatal line (a scheduler
  exception, an NCCL fault, the scheduler's own watchdog). Neither alone is enough: a quiet
  idle server prints nothing, and SGLang's `/health_generate` has answered 200 after its
  scheduler died (sgl-project/sglang#6624);
- `dead`: the process ended; an incident (`died_after_ready`, `killed`) unless it was stopped, as the
  one decision on how a healthy server's life ends says (svcdiag.judge.ending: an operator's stop is
  never an incident).

Wedged and dead are incidents (cause, evidence, since when), said once each; wedged is final for
this process (the restart is systemd's or the kubelet's to do). A wedged verdict comes at worst
`detect_s` = failures × interval_s + timeout_s after /health stops answering (docs/live.md).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from svcdiag.judge.ending import Ending

SERVING, BUSY, WEDGED, DEAD = "serving", "busy", "wedged", "dead"
#: a batch the scheduler has run: `Decode batch. #running-req: 4, …`, `Prefill batch, #new-seq: 1, …` (every release)
PROGRESS = re.compile(r"\b(?:Decode|Prefill) batch[.,]")
#: evidence kept per incident
EVIDENCE_MAX = 6


@dataclass(frozen=True, slots=True)
class WatchPolicy:
    """How often /health is asked, and how many failures in a row make a verdict possible."""

    interval_s: float = 10.0
    failures: int = 3
    #: one /health's own limit (SGLang 0.5.23's /health sleeps 1 s, then generates a token)
    timeout_s: float = 5.0
    #: every this many checks, /health_generate instead (0: never): before 0.5.23's default of
    #: SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION, /health answered without the scheduler; in 0.5.23 the two
    #: are one handler. Never alone: /health_generate has answered 200 after its scheduler died (#6624)
    generate_every: int = 6

    def path(self, check: int) -> str:
        """The endpoint of check number `check` (0, 1, …)."""
        every = self.generate_every
        return "/health_generate" if every and check % every == every - 1 else "/health"

    @property
    def detect_s(self) -> float:
        """The longest from /health's first failure to a wedged verdict, the log being silent."""
        return self.failures * self.interval_s + self.timeout_s


@dataclass(frozen=True, slots=True)
class Incident:
    """Something that happened to a healthy server: `wedged`, `died_after_ready` or `killed` (judge.ending's kinds)."""

    kind: str
    ts: float  # when it was said
    since: float  # when it began (the first failed /health, the fatal line, the exit)
    cause: str | None
    message: str
    evidence: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "ts": round(self.ts, 3), "since": round(self.since, 3), "cause": self.cause,
                "message": self.message, "evidence": list(self.evidence)}


@dataclass(slots=True)
class ServingWatch:
    """After ready, what the health checks said: serving, busy or wedged, and since when."""

    policy: WatchPolicy
    ready_ts: float
    state: str = SERVING
    #: when the current state began
    since: float = 0.0
    checks: int = 0
    failed_checks: int = 0
    fails_in_a_row: int = 0
    first_fail: float | None = None
    last_health: str = "not asked yet"
    last_latency_s: float | None = None
    last_progress: float | None = None
    batches: int = 0
    #: a fatal line after ready, while the process lives: (its time, cause, message, evidence)
    fatal: tuple[float, str | None, str, tuple[str, ...]] | None = None
    incidents: list[Incident] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.since = self.since or self.ready_ts

    # ------------------------------------------------------------ what the supervisor saw

    def line(self, ts: float, text: str) -> None:
        """A line of the server's log."""
        if PROGRESS.search(text):
            self.batches += 1
            self.last_progress = ts

    def fatal_line(self, ts: float, cause: str | None, message: str, evidence: tuple[str, ...] = ()) -> None:
        """The judge read a fatal line after ready (died_after_ready) while the process still runs."""
        if self.fatal is None:
            self.fatal = (ts, cause, message, evidence)

    def health(self, ts: float, ok: bool, latency_s: float | None, detail: str) -> Incident | None:
        """One answer of /health (`detail`: "HTTP 200", "timed out after 5 s", …); a wedged incident once it is one."""
        self.checks += 1
        self.last_latency_s = latency_s
        self.last_health = detail
        if self.state in (WEDGED, DEAD):
            return None
        if ok:
            self.fails_in_a_row, self.first_fail = 0, None
            self._to(SERVING, ts)
            return None
        self.failed_checks += 1
        self.fails_in_a_row += 1
        if self.first_fail is None:
            self.first_fail = ts
        if self.fails_in_a_row < self.policy.failures:
            return None
        if self.fatal is None and self.last_progress is not None and self.last_progress >= self.first_fail:
            self._to(BUSY, ts)  # slow or failing /health, but batches still run: loaded, not wedged
            return None
        return self._wedged(ts)

    def ended(self, ts: float, ending: Ending | None, how: str) -> Incident | None:
        """The process ended (`how`: "status 1", "killed by SIGKILL"); `ending`: the judge's one decision on how
        (judge.ending.decide, as `replay` and `wait` take it). A stop, or an exit 0, is no incident; a kill is one
        (`killed`), a crash too (`died_after_ready`)."""
        if self.state == DEAD:
            return None
        self._to(DEAD, ts)
        if ending is None or not ending.incident:
            return None
        fatal = self.fatal
        inc = Incident(ending.kind, ts, min(fatal[0], ending.since or ts) if fatal else (ending.since or ts), ending.cause,
                       f"the server exited ({how}) {ts - self.ready_ts:.0f} s after it was ready: {ending.message}",
                       (*ending.evidence, f"exit: {how}")[-EVIDENCE_MAX:])
        self.incidents.append(inc)
        return inc

    # ------------------------------------------------------------ what it says

    def _wedged(self, ts: float) -> Incident:
        assert self.first_fail is not None
        n, first = self.fails_in_a_row, self.first_fail
        if self.fatal is not None:
            f_ts, cause, message, evidence = self.fatal
            why = f"and the log said {message}"
            ev = (*evidence, f"/health: {self.last_health}")
            since = min(first, f_ts)
        else:
            quiet = f"no batch since {ts - self.last_progress:.0f} s ago" if self.last_progress is not None \
                else "no batch since ready"
            why = f"and the log is silent of progress ({quiet})"
            cause, ev, since = "health_failed", (f"/health: {self.last_health}",), first
        inc = Incident(WEDGED, ts, since, cause,
                       f"/health failed {n} times in a row over {ts - first:.0f} s ({self.last_health}) "
                       f"while the process lives, {why}", ev[-EVIDENCE_MAX:])
        self._to(WEDGED, ts)
        self.incidents.append(inc)
        return inc

    def _to(self, state: str, ts: float) -> None:
        if state != self.state:
            self.state, self.since = state, ts

    @property
    def healthy(self) -> bool:
        """Serving or busy: systemd's watchdog is fed, the kubelet's liveness probe passes."""
        return self.state in (SERVING, BUSY)

    def status(self, now: float) -> str:
        """One line (STATUS=, a probe's body): the state, since when, the latest /health."""
        if self.incidents and self.state in (WEDGED, DEAD):
            inc = self.incidents[-1]
            cause = f" [{inc.cause}]" if inc.cause else ""
            return f"{inc.kind}{cause} since {_clock(inc.since)} ({now - inc.since:.0f} s): {inc.message}"
        latency = f" in {self.last_latency_s:.2f} s" if self.last_latency_s is not None else ""
        fails = f", {self.fails_in_a_row} failed in a row" if self.fails_in_a_row else ""
        batches = f" · {self.batches:,} batches" if self.batches else ""
        if self.state == BUSY:
            return (f"busy since {_clock(self.since)} ({now - self.since:.0f} s): /health {self.last_health}{fails}, "
                    f"but batches run (last {now - (self.last_progress or now):.0f} s ago): left alone{batches}")
        return f"serving {now - self.ready_ts:.0f} s · /health {self.last_health}{latency}{fails}{batches}"


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))
