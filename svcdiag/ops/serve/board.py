"""`svcdiag top`: every svcdiag unit on one board, kept current without polling.

One D-Bus connection watches every unit (PropertiesChanged), one journal reader per
current start follows its lines, and the loop sleeps in poll(2) on those fds (and the
keyboard's) until one says something changed; only a start in progress wakes it once a
second, to move its elapsed time. A start's lines go through the same Judge as `up`, so
the board's phase, progress and verdict are the ones `up --wait-ready` reports.

A remote host's board (`top --host`) is the same loop: its D-Bus signals come over the SSH
connection, and each start's journal is streamed from there (`journalctl --follow` over SSH,
whose pipe wakes the loop as the local journal's fd does).
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from svcdiag.errors import SvcdiagError
from svcdiag.ops.serve.status_line import watch_word

TYPE_CHECKING = False
if TYPE_CHECKING:  # the judge is imported for a start judged from its lines: a snapshot of starts whose
    # supervisors published their verdicts (ops.serve.service.published_verdicts) needs none of it
    from svcdiag.config.service import ServiceConfig
    from svcdiag.judge.progress import PhaseProgress
    from svcdiag.systemd.dbus import Systemd, UnitProps

#: how often the board moves on its own: each second while a start is in progress (its elapsed
#: time and ETA move), rarely otherwise (uptimes)
TICK_STARTING = 1.0
TICK_IDLE = 30.0
#: failing first, then what is starting, then what serves, then what is off
ORDER = {"failed": 0, "timed_out": 0, "wedged": 0, "starting": 1, "degraded": 2, "healthy": 3, "stopped": 4, "inactive": 4,
         "not installed": 5}


@dataclass(frozen=True, slots=True)
class BoardRow:
    """One unit on `top`'s board: its state, phase, progress, figures and last verdict."""

    name: str
    unit: str
    state: str  # starting | healthy | degraded | wedged | failed | timed_out | stopped | inactive | not installed
    active_state: str
    sub_state: str
    invocation: str | None = None
    phase: str | None = None
    progress: PhaseProgress | None = None
    elapsed_s: float | None = None  # since the start began (until its verdict)
    phase_elapsed_s: float | None = None
    usual_s: float | None = None  # the last healthy start's whole start-up
    usual_phase_s: float | None = None  # ... and its time in this phase
    uptime_s: float | None = None
    kv_tokens: int | None = None
    max_running: int | None = None
    max_running_requested: int | None = None
    degraded: tuple[str, ...] = ()
    verdict: str | None = None
    cause: str | None = None
    message: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    #: after ready, the supervisor's serving watch: (serving | busy | wedged | died_after_ready, its words)
    watch: tuple[str, str] | None = None

    @property
    def order(self) -> tuple[int, str]:
        return ORDER.get(self.state, 4), self.name

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": "board", "name": self.name, "unit": self.unit, "state": self.state,
                               "active_state": self.active_state, "sub_state": self.sub_state,
                               "invocation": self.invocation, "phase": self.phase,
                               "progress": self.progress.figures() if self.progress else None}
        for key in ("elapsed_s", "phase_elapsed_s", "usual_s", "usual_phase_s", "uptime_s"):
            v = getattr(self, key)
            out[key] = None if v is None else round(v, 1)
        out.update(kv_tokens=self.kv_tokens, max_running_requests=self.max_running,
                   requested_max_running_requests=self.max_running_requested, degraded=list(self.degraded),
                   verdict=self.verdict, cause=self.cause, message=self.message,
                   watch={"state": self.watch[0], "status": self.watch[1]} if self.watch else None)
        return out


class _Start:
    """One unit's current start: its journal, read so far, through a Judge. Not `follow`ing (a
    snapshot), a remote journal is read to its end at once."""

    published: dict[str, Any] | None = None

    def __init__(self, cfg: ServiceConfig, props: UnitProps, sd: Systemd, *, follow: bool = True):
        from svcdiag.judge.pipeline import Judge

        self.invocation = props.invocation
        start = props.inactive_exit_ts or props.state_change_ts or time.time()
        self.judge = Judge(cfg, unit=cfg.unit, invocation=props.invocation, start_ts=start)
        self.notify = cfg.readiness == "notify"  # its supervisor owns the phase deadlines (deadline_owner)
        self.journal: Any = sd.follower(cfg.unit, props.invocation, follow=follow)

    def drain(self) -> bool:
        if self.journal is None:
            return False
        got = False
        for rec in self.journal.read():
            got = True
            if rec.dropped:
                self.judge.journal_dropped(rec.dropped)
            elif rec.systemd:
                self.judge.systemd_line(rec.text, rec.ts)
            else:
                self.judge.service_line(rec.text, rec.ts)
        return got

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
            self.journal = None


class _Published:
    """A start whose supervisor published its healthy verdict (a snapshot of a serving notify unit):
    its record stands for the judge, and no line of it is read."""

    journal = None

    def __init__(self, invocation: str, record: dict[str, Any]):
        self.invocation, self.published = invocation, record

    def drain(self) -> bool:
        return False

    def close(self) -> None:
        pass


class Board:
    """Every config's unit, its current start judged from the journal, and its usual times."""

    def __init__(self, sd: Systemd, configs: list[ServiceConfig], *, follow: bool = True):
        self.sd, self.configs, self.follow = sd, configs, follow
        self.props: dict[str, UnitProps] = {}
        self.starts: dict[str, _Start | _Published] = {}
        self._dirty = {cfg.unit for cfg in configs}
        self.usual = usual_times([c.name for c in configs]) if sd.remote is None else usual_from_history(configs)
        for cfg in configs:
            sd.watch(cfg.unit, lambda unit=cfg.unit: self._dirty.add(unit))

    def fds(self) -> dict[int, _Start | None]:
        """The fds to wait on: the bus's (None), and each followed start's journal."""
        out: dict[int, _Start | None] = {self.sd.fileno(): None}
        for s in self.starts.values():
            if s.journal is not None:
                out[s.journal.fileno()] = s
        return out

    def refresh(self, now: float | None = None) -> bool:
        """Take in what changed (D-Bus first, then the journals); True if the board may look different."""
        self.sd.process()
        changed = bool(self._dirty)
        dirty = [cfg for cfg in self.configs if cfg.unit in self._dirty]
        self._dirty.clear()
        brief = not self.follow and self.sd.remote is None  # a snapshot here: published verdicts stand
        states = self.sd.states([c.unit for c in dirty], brief=brief)
        if brief:
            from svcdiag.ops.serve.service import published_verdicts

            said = published_verdicts(self.sd, dirty, states)
        for cfg, listed in zip(dirty, states, strict=True):
            props, cur = listed, self.starts.get(cfg.unit)
            if props.invocation and props.load_state != "not-found" and (cur is None or cur.invocation != props.invocation):
                if cur is not None:
                    cur.close()
                if brief and cfg.unit in said:
                    self.starts[cfg.unit] = _Published(props.invocation, said[cfg.unit])
                else:
                    props = self.sd.props(cfg.unit) if brief else props  # following a start needs them all
                    self.starts[cfg.unit] = _Start(cfg, props, self.sd, follow=self.follow)
            self.props[cfg.unit] = props
        now = time.time() if now is None else now
        for unit, s in self.starts.items():
            if isinstance(s, _Published):
                continue
            changed = s.drain() or changed
            props = self.props.get(unit)
            if props is not None and s.invocation == props.invocation and props.running:
                from svcdiag.ops.serve import deadline_owner

                before = s.judge.verdict
                deadline_owner.tick(s.judge, now, supervised=s.notify, status=props.status_text)
                changed = changed or s.judge.verdict is not before
            elif props is not None and not props.running and s.journal is not None:
                s.drain()
                s.close()  # the start is over: its journal says nothing more
                if s.notify:
                    from svcdiag.ops.serve.follow import _supervisors_failure

                    _supervisors_failure(s.judge, props)
        return changed

    def starting(self) -> bool:
        return any(r.state == "starting" for r in self.rows())

    def rows(self, now: float | None = None) -> list[BoardRow]:
        now = time.time() if now is None else now
        return sorted((self._row(cfg, now) for cfg in self.configs), key=lambda r: r.order)

    def _row(self, cfg: ServiceConfig, now: float) -> BoardRow:
        props = self.props.get(cfg.unit)
        if props is None:
            return BoardRow(cfg.name, cfg.unit, "inactive", "unknown", "unknown")
        base = {"name": cfg.name, "unit": cfg.unit, "active_state": props.active_state, "sub_state": props.sub_state}
        if props.load_state == "not-found":
            return BoardRow(state="not installed", **base)
        s = self.starts.get(cfg.unit)
        if s is None:
            return BoardRow(state="failed" if props.active_state == "failed" else "inactive", **base)
        if isinstance(s, _Published):
            return self._published_row(cfg, props, s, base, now)
        r, v = s.judge.readiness, s.judge.verdict
        figures = v.figures if v is not None else r.figures
        usual = self.usual.get(cfg.name, {})
        phase = v.phase if v is not None else r.phase
        degraded = tuple(d["reason"] for d in (v.degraded if v is not None else r.degraded))
        if v is None:
            state = "starting" if props.running else "failed" if props.active_state == "failed" else "stopped"
        elif v.verdict == "healthy":
            state = ("degraded" if degraded else "healthy") if props.running else "stopped"
        else:
            state = v.verdict if v.verdict in ("failed", "timed_out") else "failed"
        watch = watch_word(props.status_text) if s.notify and props.running and v is not None \
            and v.verdict == "healthy" else None
        if watch is not None and watch[0] == "wedged":
            state = "wedged"  # healthy when judged, not serving now
        in_progress = v is None and props.running
        since = r.phase_since
        return BoardRow(
            state=state, invocation=s.invocation, phase=phase, **base,
            progress=r.progress.latest.get(phase) if in_progress else None,
            elapsed_s=now - r.started if in_progress and r.started is not None else None,
            phase_elapsed_s=now - since if in_progress and since is not None else None,
            usual_s=usual.get("startup_s"), usual_phase_s=(usual.get("phase_seconds") or {}).get(phase),
            uptime_s=now - props.active_enter_ts if props.running and props.active_enter_ts and not in_progress else None,
            kv_tokens=figures.kv_tokens, max_running=figures.max_running_requests,
            max_running_requested=figures.requested_max_running_requests, degraded=degraded,
            verdict=v.verdict if v is not None else None, cause=v.cause if v is not None else None,
            message=v.message if v is not None else None, figures=figures.to_json(), watch=watch)

    def _published_row(self, cfg: ServiceConfig, props: UnitProps, s: _Published, base: dict[str, Any],
                       now: float) -> BoardRow:
        """The row `_row` makes of a healthy start judged from its lines, from its supervisor's record."""
        rec = s.published or {}
        figures = rec.get("figures") or {}
        degraded = tuple(d["reason"] for d in rec.get("degraded") or ())
        watch = watch_word(props.status_text)
        state = "wedged" if watch is not None and watch[0] == "wedged" else "degraded" if degraded else "healthy"
        usual = self.usual.get(cfg.name, {})
        phase = rec.get("phase")
        return BoardRow(
            state=state, invocation=s.invocation, phase=phase, **base,
            usual_s=usual.get("startup_s"), usual_phase_s=(usual.get("phase_seconds") or {}).get(phase),
            uptime_s=now - props.active_enter_ts if props.active_enter_ts else None,
            kv_tokens=figures.get("kv_tokens"), max_running=figures.get("max_running_requests"),
            max_running_requested=figures.get("requested_max_running_requests"), degraded=degraded,
            verdict=rec.get("verdict"), cause=rec.get("cause"), message=rec.get("message"), figures=figures, watch=watch)

    def close(self) -> None:
        for s in self.starts.values():
            s.close()


def usual_times(names: list[str]) -> dict[str, dict[str, Any]]:
    """Each config's last healthy start, from the verdict records in the journal: its start-up
    time and its phase_seconds. Empty where there was none (or the journal cannot be read)."""
    from svcdiag.systemd.journal import EventReader

    out: dict[str, dict[str, Any]] = {}
    try:
        reader = EventReader(units=names, event="verdict", verdict="healthy")  # not every milestone of every start
    except SvcdiagError:
        return out
    for rec in reader.read():
        if rec.event == "verdict" and rec.verdict == "healthy" and rec.config:
            startup = (rec.figures or {}).get("startup_s")  # (not Figures.from_json: its dataclass costs ~10 ms to import)
            out[rec.config] = {"startup_s": startup if isinstance(startup, (int, float)) and not isinstance(startup, bool)
                               else None,
                               "phase_seconds": rec.data.get("phase_seconds") or {}}
    return out


def usual_from_history(configs: list[ServiceConfig]) -> dict[str, dict[str, Any]]:
    """A remote host's usual times: the last healthy start svcdiag recorded here (`up --host`
    writes its verdicts to this machine's history, not that host's journal)."""
    from svcdiag.ops.host.history import load_usual

    out: dict[str, dict[str, Any]] = {}
    for cfg in configs:
        last = load_usual(cfg, None).last_healthy
        if last:
            out[cfg.name] = {"startup_s": last.get("startup_s"), "phase_seconds": last.get("phase_seconds") or {}}
    return out


def watch(board: Board, draw: Callable[[list[BoardRow]], None], *, keys_fd: int | None = None,
          on_key: Callable[[], str] = lambda: "") -> None:
    """Redraw `board` whenever something changed, until `on_key()` reads `q` (keys_fd readable)."""
    board.refresh()
    draw(board.rows())
    last_draw = time.monotonic()
    poller = select.poll()
    registered: set[int] = set()
    if keys_fd is not None:
        poller.register(keys_fd, select.POLLIN)
    while True:
        fds = board.fds()
        for fd in registered - set(fds):
            poller.unregister(fd)
        for fd in set(fds) - registered:
            poller.register(fd, select.POLLIN)
        registered = set(fds)
        tick = TICK_STARTING if board.starting() else TICK_IDLE
        wait = max(0.0, tick - (time.monotonic() - last_draw))
        ready = poller.poll(wait * 1000)
        for fd, _ in ready:
            if fd == keys_fd:
                if on_key().lower() == "q":
                    return
            elif (s := fds.get(fd)) is not None and s.journal is not None:
                s.journal.on_fd_event()
        changed = board.refresh()
        if changed or time.monotonic() - last_draw >= tick:
            draw(board.rows())
            last_draw = time.monotonic()
