"""sd_notify (cysystemd): the one place that knows the notification protocol.

`svcdiag supervise` is a `Type=notify` unit's main process; through this it tells systemd
READY=1, the phase in STATUS=, each phase's deadline in EXTEND_TIMEOUT_USEC= and, after
ready, WATCHDOG=1. Without $NOTIFY_SOCKET (run by hand, or in a test) every call is a no-op
that still records what it would have sent (`sent`), so the supervisor is testable
without systemd.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from svcdiag.config.service import ALLOWANCES, restart_of

#: STATUS= is shown by `systemctl status`; keep it one readable line
STATUS_MAX = 240
#: how many sent messages a Notifier keeps for inspection
KEEP = 64
#: the floor of the extension slice, so that a tiny deadline does not mean a busy supervisor
MIN_SLICE_S = 2.0


def slice_s(timeouts: dict[str, float]) -> float:
    """The longest single EXTEND_TIMEOUT_USEC: the shortest deadline. systemd only ever moves a start
    timeout later, so an extension must never reach past the end of a phase that may yet have a
    shorter deadline than the one before it."""
    return max(MIN_SLICE_S, min(v for k, v in timeouts.items() if k not in ALLOWANCES))


#: seconds added to the whole start's limit, so that the supervisor's own deadline always comes first
START_LIMIT_MARGIN_S = 60.0


def start_limit_s(timeouts: dict[str, float]) -> float:
    """A notify unit's TimeoutStartSec: the longest a whole start can take within svcdiag's deadlines
    (every phase to its end, the HTTP cross-check, every allowance), plus a margin. The supervisor
    enforces each phase's deadline itself; systemd's limit is only the backstop. It must be the
    whole start's because systemd forgets EXTEND_TIMEOUT_USEC on daemon-reload (measured in systemd
    252: the start timeout is re-armed at the start's beginning + TimeoutStartSec), so a shorter
    limit would let any reload kill a start that has run longer than it (docs/live.md)."""
    phases = [v for k, v in timeouts.items() if k not in ALLOWANCES and k != "http_check"]
    allowances = len(phases) * timeouts.get("jit_compile", 0.0) + timeouts.get("loading_weights", 0.0) \
        + timeouts.get("cuda_graph", 0.0) + timeouts.get("kv_cache", 0.0)  # precompile (once a phase), draft, host pool
    return sum(phases) + timeouts.get("http_check", 0.0) + allowances + START_LIMIT_MARGIN_S


#: RestartSec= of a unit that restarts, unless the config's restart_sec says otherwise
DEFAULT_RESTART_S = 10.0
#: starts systemd allows within StartLimitIntervalSec= (restarts included) before it leaves the unit failed
START_LIMIT_BURST = 3


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """A notify unit's one story of time (docs/config.md#restarts): TimeoutStartSec= is the whole
    start's limit; a unit with a watchdog restarts (Restart=on-failure) after RestartSec=, and
    StartLimitIntervalSec= is START_LIMIT_BURST whole starts and their waits, so that the limit
    catches even a loop of starts that each run to their limit: a unit that fails that many starts
    in a row stays failed instead of burning GPU hours, while a wedge weeks later is restarted."""

    timeout_start_s: float
    restart: str  # systemd's Restart=: the config's `restart`, else on-failure with a watchdog, else no
    restart_s: float | None  # RestartSec=; None: Restart=no

    @property
    def interval_s(self) -> float:
        return START_LIMIT_BURST * (self.timeout_start_s + (self.restart_s or 0.0))

    @property
    def burst(self) -> int:
        return START_LIMIT_BURST


def restart_policy(timeouts: dict[str, float], watchdog_s: float | None, restart: str | None = None,
                   restart_sec: float | None = None) -> RestartPolicy:
    """The unit's TimeoutStartSec=, Restart=, RestartSec= and start limits, from its deadlines, its
    watchdog and the config's own `restart` policy (an imported unit's is kept): a watchdog without a
    policy restarts on failure; neither, and a failed unit stays failed."""
    policy = restart_of(restart, watchdog_s)
    if policy == "no":
        return RestartPolicy(start_limit_s(timeouts), "no", None)
    return RestartPolicy(start_limit_s(timeouts), policy, restart_sec if restart_sec is not None else DEFAULT_RESTART_S)


def _send_cysystemd() -> Callable[[str], object]:
    # cysystemd.daemon.notify() takes one Notification (READY, STATUS, WATCHDOG, ...) but has no
    # EXTEND_TIMEOUT_USEC (systemd ≥ 236); its sd_notify takes the raw state line, which both use.
    from cysystemd._daemon import sd_notify

    return lambda line: sd_notify(line, False)


class Notifier:
    def __init__(self, send: Callable[[str], object] | None = None):
        self.enabled = bool(os.environ.get("NOTIFY_SOCKET"))
        self._send = send if send is not None else (_send_cysystemd() if self.enabled else None)
        self.sent: list[str] = []
        self.last_status: str | None = None
        self._held: dict[str, str] | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        """What is said inside goes out at the end, in one datagram: the last message of each
        kind, STATUS= first (what a follower waits for). One read of the server's output, however
        many lines, costs PID 1 one notification and D-Bus clients one PropertiesChanged."""
        self._held = {}
        try:
            yield
        finally:
            self.flush()
            self._held = None

    def flush(self) -> None:
        """Send what is held now (and keep holding): before a thread that may take the GIL for a while."""
        if self._held:
            held, self._held = self._held, None
            self._notify("\n".join(held[key] for key in sorted(held, key=lambda k: k != "STATUS")))
            self._held = {}

    def _notify(self, line: str) -> None:
        if self._held is not None:
            self._held[line.split("=", 1)[0]] = line
            return
        self.sent.append(line)
        del self.sent[:-KEEP]
        if self._send is not None:
            try:
                self._send(line)
            except OSError:
                pass  # systemd went away: nothing to tell, and the server must keep running

    def ready(self, status: str | None = None) -> None:
        self._notify("READY=1" + (f"\nSTATUS={one_line(status)}" if status else ""))
        if status:
            self.last_status = one_line(status)

    def status(self, text: str) -> None:
        line = one_line(text)
        if line != self.last_status:
            self.last_status = line
            self._notify(f"STATUS={line}")

    def extend(self, seconds: float) -> None:
        """systemd's start timeout now ends `seconds` from now (it can only move later)."""
        self._notify(f"EXTEND_TIMEOUT_USEC={max(1, int(seconds * 1e6))}")

    def watchdog(self) -> None:
        self._notify("WATCHDOG=1")

    def watchdog_trigger(self, status: str) -> None:
        """Tell systemd the service is wedged: it acts as on a missed WATCHDOG=1 at once (Result=watchdog,
        SIGABRT, then Restart=), and `systemctl status` keeps `status`, the why."""
        line = one_line(status)
        self.last_status = line
        self._notify(f"STATUS={line}\nWATCHDOG=trigger")

    def stopping(self) -> None:
        self._notify("STOPPING=1")


def one_line(text: str) -> str:
    """`text` as one STATUS= line: whitespace collapsed, cut at STATUS_MAX."""
    text = " ".join(text.split())
    return text if len(text) <= STATUS_MAX else text[: STATUS_MAX - 1] + "…"


def watchdog_usec() -> int | None:
    """WatchdogSec= as systemd passed it to the main process (WATCHDOG_USEC), if for us."""
    pid = os.environ.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None
    v = os.environ.get("WATCHDOG_USEC", "")
    return int(v) if v.isdigit() and int(v) > 0 else None
