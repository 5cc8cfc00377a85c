"""From the judge's events to the published ones, and out to every destination at once.

The judge speaks in grammar events (kv_cache, weights_end, ...) and verdicts; operators
get schema.ReadinessEvent records. A Publisher makes one record per event, stamped with
the unit, invocation, config and phase, and hands it to each sink: the terminal (lines
or JSON), the journal, the Prometheus textfile, the live status line.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from svcdiag.judge.progress import PhaseProgress
from svcdiag.judge.verdict import PhaseChange, Verdict
from svcdiag.output.progress import progress_text
from svcdiag.output.report import describe
from svcdiag.output.schema import ReadinessEvent
from svcdiag.sglang.events import Event, Failure

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:  # an annotation only: a replay or a publisher without a config imports no config module
    import threading
    from typing import Any, Protocol, TextIO

    from svcdiag.config.service import ServiceConfig

    class Sink(Protocol):  # an annotation only (typing is not imported at run time)
        def publish(self, rec: ReadinessEvent) -> None: ...


class LockedSink:
    """A sink shared by several threads (a multi-node start's nodes, a campaign's runs): one
    record, or one progress tick, at a time. `lock` is reentrant, so a sink may publish from
    its own progress hook."""

    def __init__(self, sink: Any, lock: threading.RLock):
        self.sink, self.lock = sink, lock

    def publish(self, rec: Any) -> None:
        with self.lock:
            self.sink.publish(rec)

    def progress(self, p: Any) -> None:
        tick = getattr(self.sink, "progress", None)
        if tick is not None:
            with self.lock:
                tick(p)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)


@dataclasses.dataclass(frozen=True, slots=True)
class Progress:
    """Where a start is, for a live display: asked for on every tick of a wait."""

    unit: str | None
    config: str | None
    phase: str
    started: float | None
    deadline: float | None  # when the current phase (or the whole start) times out, on the wall clock
    now: float
    phase_started: float | None = None  # when this phase began, on the wall clock
    usual: float | None = None  # what this phase usually takes (history's p50), for an ETA


_SKIP = {"ts", "ranks", "line"}
#: progress records at most this often per unit (on the log's clock), besides a bar's first and last update
PROGRESS_EVERY = 0.25


#: an event type's figure names (dataclasses.fields per event: ~10 µs of a live follower's cold wakeup)
_FIGURES: dict[type, tuple[str, ...]] = {}


def figures_of(ev: Event) -> dict[str, Any]:
    names = _FIGURES.get(type(ev))
    if names is None:
        names = _FIGURES[type(ev)] = tuple(f.name for f in dataclasses.fields(ev) if f.name not in _SKIP)
    return {name: value for name in names if (value := getattr(ev, name)) is not None}


def verdict_record(v: Verdict, config: str | None = None) -> ReadinessEvent:
    return ReadinessEvent(
        event="verdict", ts=v.ts, unit=v.unit, invocation=v.invocation, config=config, phase=v.phase,
        verdict=v.verdict, cause=v.cause, message=v.message, figures=v.figures.to_json(),
        data={"evidence": list(v.evidence), "phase_seconds": dict(v.phase_seconds), "last_line": v.last_line,
              "stalled_s": v.stalled_s, "diagnosis": v.diagnosis, "degraded": [dict(d) for d in v.degraded]})


def wants_live(out: TextIO, as_json: bool) -> bool:
    """A live line only on a real terminal, never with --json."""
    return not as_json and out.isatty()


def for_terminal(out: TextIO, cfg: ServiceConfig | None, *, as_json: bool, live: bool, textfile: str | None,
                 extra: Iterable[Sink] = (), progress: bool = False) -> Publisher:
    """A command's publisher: JSON Lines (`progress` records only when asked), a live line on a
    TTY, or plain lines; a textfile when asked."""
    from svcdiag.output.report import JsonLines, Lines

    if as_json:
        term: Sink = JsonLines(out, progress=progress)
    elif live and wants_live(out, as_json):  # the live line's module (and shutil's) only then
        from svcdiag.output.live_line import LiveTerminal

        term = LiveTerminal(out)
    else:
        term = Lines(out)
    sinks: list[Sink] = [term, *extra]
    if textfile:
        from svcdiag.output.textfile import Textfile

        sinks.append(Textfile(textfile))
    return Publisher(sinks, config=cfg.name if cfg else None, unit=cfg.unit if cfg else None)


class Publisher:
    """One start's (or one command's) stream of records, fanned out to the sinks."""

    def __init__(self, sinks: Iterable[Sink], *, config: str | None = None, unit: str | None = None,
                 invocation: str | None = None):
        self.sinks = list(sinks)
        self.config, self.unit, self.invocation = config, unit, invocation
        self.phase: str | None = None
        self._failure_sent = False
        self._progress_at: dict[str | None, tuple[float, str, str]] = {}  # unit -> (ts, phase, label) last sent
        self._later: list[ReadinessEvent] | None = None  # inside terminal_first(): for the other sinks

    def start(self, unit: str | None, invocation: str | None) -> None:
        """A (new) start is being followed: its records carry its invocation id."""
        self.unit, self.invocation, self.phase = unit, invocation, "starting"
        self._failure_sent = False

    def record(self, event: str, **kw: Any) -> ReadinessEvent:
        kw.setdefault("phase", self.phase)
        return ReadinessEvent(event=event, unit=self.unit, invocation=self.invocation, config=self.config, **kw)

    def publish(self, rec: ReadinessEvent) -> None:
        if self._later is not None and self.sinks:
            self.sinks[0].publish(rec)
            self._later.append(rec)
            return
        for sink in self.sinks:
            sink.publish(rec)

    @contextmanager
    def terminal_first(self) -> Iterator[None]:
        """Within: each record goes to the first sink (the terminal) at once, and to the others
        (svcdiag's own journal record, ~0.1-0.5 ms each; the textfile) when the block ends, in
        order. A follower reads a burst of lines in one block: the second milestone of the burst
        reaches stdout without waiting for the first one's journal record."""
        if self._later is not None:  # already inside one
            yield
            return
        self._later = []
        try:
            yield
        finally:
            later, self._later = self._later, None
            for rec in later:
                for sink in self.sinks[1:]:
                    sink.publish(rec)

    def event(self, ev: Event) -> None:
        """A judge event (a Verdict is published once, last, by verdict())."""
        if isinstance(ev, Verdict):
            return
        if isinstance(ev, PhaseProgress):
            if self._throttled(ev):
                return
            rec = self.record("progress", ts=ev.ts, phase=ev.phase, message=progress_text(ev), figures=ev.figures())
        elif isinstance(ev, PhaseChange):
            self.phase = ev.phase
            rec = self.record("phase_entered", ts=ev.ts, message=describe(ev),
                              data={"previous": ev.previous, "previous_s": ev.previous_s})
        elif isinstance(ev, Failure):
            self._failure_sent = True
            rec = self.record("failure", ts=ev.ts, cause=ev.cause, message=ev.message, line=ev.line or None,
                              data={"evidence": list(ev.evidence), "signal": ev.signal, "status": ev.status})
        else:
            rec = self.record("milestone", ts=ev.ts, milestone=ev.kind, message=describe(ev),
                              figures=figures_of(ev), line=ev.line or None)
        self.publish(rec)

    def _throttled(self, ev: PhaseProgress) -> bool:
        """≤ 4 records a second per unit; a new bar, a new phase and a bar's end always get through."""
        now = ev.ts if ev.ts is not None else time.time()
        last = self._progress_at.get(self.unit)
        if last is not None and last[1:] == (ev.phase, ev.label) and ev.done < ev.total \
                and 0 <= now - last[0] < PROGRESS_EVERY:
            return True
        self._progress_at[self.unit] = (now, ev.phase, ev.label)
        return False

    def note(self, text: str) -> None:
        self.publish(self.record("note", message=text))

    def verdict(self, v: Verdict) -> Verdict:
        """Publish a verdict (already diagnosed by the caller): its diagnosis first, the verdict last."""
        if v.verdict == "failed" and not self._failure_sent:
            # concluded from the unit's state (exit status, signal) rather than a log line:
            # every failed start still carries one failure record
            self._failure_sent = True
            self.publish(self.record("failure", ts=v.ts, phase=v.phase, cause=v.cause, message=v.message,
                                     data={"evidence": list(v.evidence[-3:]), "signal": v.figures.signal,
                                           "status": v.figures.exit_status}))
        if v.diagnosis:
            d = v.diagnosis
            self.publish(self.record("diagnosis", ts=v.ts, phase=v.phase, cause=d.get("cause"),
                                     message=" ".join(d.get("explanation", [])),
                                     data={"explanation": d.get("explanation", []), "fixes": d.get("fixes", [])}))
        self.phase = v.phase
        self.publish(dataclasses.replace(verdict_record(v, self.config), unit=v.unit or self.unit,
                                         invocation=v.invocation or self.invocation))
        return v

    def progress(self, p: Progress) -> None:
        for sink in self.sinks:
            tick = getattr(sink, "progress", None)
            if tick is not None:
                tick(p)

    def close(self) -> None:
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                close()
