"""systemd over D-Bus (pystemd): the one place that knows D-Bus.

One shared bus connection. Jobs are awaited through Subscribe + JobRemoved, and a unit's
state changes arrive as PropertiesChanged signals on the same connection, whose fd the
caller polls beside the journal's: nothing here sleeps or polls on a timer.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from svcdiag.errors import AccessDenied, SvcdiagError
from svcdiag.signals import signal_name

DEST = b"org.freedesktop.systemd1"
MANAGER_PATH = b"/org/freedesktop/systemd1"
MANAGER = b"org.freedesktop.systemd1.Manager"
UNIT = b"org.freedesktop.systemd1.Unit"
SERVICE = b"org.freedesktop.systemd1.Service"
PROPERTIES = b"org.freedesktop.DBus.Properties"
#: waitid(2)'s si_code, as ExecMainCode reports it
CLD = {1: "exited", 2: "killed", 3: "dumped"}
CONNECT_RETRY_S = 2.0
NO_BUS = ("no system bus: systemd is not PID 1 here, so there is no unit to start or watch; "
          "run on a systemd host, or in the private rig: python -m svcdiag.rig run -- svcdiag ...")


@dataclass(frozen=True)
class UnitProps:
    name: str
    load_state: str
    active_state: str
    sub_state: str
    result: str
    invocation: str
    main_pid: int
    exec_main_code: int
    exec_main_status: int
    active_enter_ts: float | None
    inactive_exit_ts: float | None
    state_change_ts: float | None
    fragment_path: str
    job: bool
    exec_start: tuple[tuple[str, ...], ...] = ()

    @property
    def running(self) -> bool:
        return self.active_state in ("activating", "active", "reloading")

    @property
    def exit_line(self) -> str | None:
        """The main process's end, in the words of systemd's own log line."""
        code = CLD.get(self.exec_main_code)
        if code is None:
            return None
        if code == "exited":
            status = f"{self.exec_main_status}/{'SUCCESS' if self.exec_main_status == 0 else 'FAILURE'}"
        else:
            status = f"{self.exec_main_status}/{signal_name(self.exec_main_status)}"
        return f"Main process exited, code={code}, status={status}"


def _s(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def _ts(usec: Any) -> float | None:
    return usec / 1e6 if isinstance(usec, int) and usec > 0 else None


class Systemd:
    def __init__(self, bus: Any, remote: Any = None, *, owns_remote: bool = True):
        self.bus = bus
        self._owns_remote = owns_remote
        #: the SSH connection (svcdiag.systemd.remote.Connection) when systemd is on another host
        self.remote = remote
        self._subscribed = False
        self._jobs: dict[bytes, str] = {}
        self._callbacks: list[Callable[..., None]] = []  # pystemd keeps only a raw pointer

    @classmethod
    def connect(cls, host: str | None = None) -> Systemd:
        """This host's systemd, or with `host` ([user@]HOST[:port]) that host's, over SSH."""
        from svcdiag.systemd import remote

        if not remote.is_local(host):
            assert host is not None
            conn = remote.connect(host)
            try:
                return cls(conn.open_bus(), conn)
            except BaseException:
                conn.close()
                raise
        if not os.path.isdir("/run/systemd/system"):
            raise SvcdiagError(NO_BUS)
        from pystemd.dbuslib import DBus
        from tenacity import RetryError, Retrying, stop_after_delay, wait_exponential

        def open_bus() -> Any:
            bus = DBus()
            bus.open()
            return bus

        # the bus can be away for a moment (dbus-daemon restarting): retry briefly, then say so
        retry = Retrying(stop=stop_after_delay(CONNECT_RETRY_S), wait=wait_exponential(multiplier=0.05, max=0.5))
        try:
            return cls(retry(open_bus))
        except RetryError:
            raise SvcdiagError(NO_BUS) from None

    def close(self) -> None:
        try:
            self.bus.close()
        finally:
            if self.remote is not None and self._owns_remote:
                self.remote.close()

    def another(self) -> Systemd:
        """A second connection to the same systemd, for another thread: over the same SSH
        connection when remote (closing it leaves that connection open)."""
        if self.remote is None:
            return Systemd.connect()
        return Systemd(self.remote.open_bus(), self.remote, owns_remote=False)

    @property
    def where(self) -> str:
        """The host, as the user named it (\"local\" here)."""
        return str(self.remote.target) if self.remote is not None else "local"

    def follower(self, unit: str, invocation: str, *, follow: bool = True) -> Any:
        """One invocation's journal: read here (cysystemd), or streamed from the remote host."""
        if self.remote is not None:
            from svcdiag.systemd.remote import RemoteFollower

            return RemoteFollower(self.remote, unit, invocation, follow=follow)
        from svcdiag.systemd.journal import Follower

        return Follower(unit, invocation)

    def _lost(self) -> None:
        if self.remote is not None and not self.remote.alive():
            from svcdiag.systemd.remote import ConnectionLost

            raise ConnectionLost(f"{self.remote.target}: connection lost") from None

    def __enter__(self) -> Systemd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ calls

    def _call(self, path: bytes, interface: bytes, method: bytes, signature: bytes = b"", args: list[Any] = ()) -> Any:
        from pystemd.dbuslib import apply_signature

        try:
            return self.bus.call_method(DEST, path, interface, method,
                                        apply_signature(signature, list(args)) if signature else []).body
        except Exception as e:
            self._lost()
            text = str(e)
            if "AccessDenied" in text or "access denied" in text.lower() or "interactive authentication" in text.lower() \
                    or "[err -13]" in text:  # EACCES: polkit said no (docs/polkit.md)
                raise AccessDenied(method.decode()) from None
            if "NoSuchUnit" in text or "not found" in text.lower():
                raise SvcdiagError(f"systemd: {text}") from None
            raise SvcdiagError(f"systemd {method.decode()} failed: {text}") from None

    def fileno(self) -> int:
        return self.bus.get_fd()

    def subscribe(self) -> None:
        if self._subscribed:
            return
        self._match(MANAGER_PATH, MANAGER, b"JobRemoved", self._on_job_removed)
        self._call(MANAGER_PATH, MANAGER, b"Subscribe")
        self._subscribed = True

    def _match(self, path: bytes, interface: bytes, member: bytes, handler: Callable[[Any], None]) -> None:
        def callback(msg: Any, error: Any = None, userdata: Any = None) -> None:
            handler(msg)

        self._callbacks.append(callback)
        self.bus.match_signal(DEST, path, interface, member, callback)

    def _on_job_removed(self, msg: Any) -> None:
        msg.process_reply(False)
        _id, job, _unit, result = msg.body
        self._jobs[bytes(job)] = _s(result)

    def process(self) -> None:
        """Dispatch what arrived on the bus (signals run their callbacks)."""
        while True:
            try:
                msg = self.bus.process()
            except Exception as e:
                self._lost()
                if self.remote is not None:  # the bridge's end of the bus closed: the same for us
                    from svcdiag.systemd.remote import ConnectionLost

                    raise ConnectionLost(f"{self.remote.target}: connection lost ({e})") from None
                raise
            if msg.is_empty():
                return

    def daemon_reload(self) -> None:
        self._call(MANAGER_PATH, MANAGER, b"Reload")

    def unit_path(self, unit: str) -> bytes:
        return bytes(self._call(MANAGER_PATH, MANAGER, b"LoadUnit", b"s", [unit.encode()]))

    def _job(self, method: bytes, unit: str, mode: str) -> bytes:
        self.subscribe()  # before the call: JobRemoved may follow at once
        return bytes(self._call(MANAGER_PATH, MANAGER, method, b"ss", [unit.encode(), mode.encode()]))

    def start(self, unit: str, mode: str = "replace") -> bytes:
        return self._job(b"StartUnit", unit, mode)

    def stop(self, unit: str, mode: str = "replace") -> bytes:
        return self._job(b"StopUnit", unit, mode)

    def restart(self, unit: str, mode: str = "replace") -> bytes:
        return self._job(b"RestartUnit", unit, mode)

    def wait_job(self, job: bytes, timeout: float) -> str:
        """Block until JobRemoved names `job`: done, canceled, timeout, failed, dependency, skipped."""
        deadline = time.monotonic() + timeout
        while job not in self._jobs:
            self.process()
            if job in self._jobs:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise SvcdiagError(f"systemd did not finish job {job.decode()} within {timeout:.0f} s")
            select.select([self.fileno()], [], [], left)
        return self._jobs.pop(job)

    def job_result(self, job: bytes) -> str | None:
        """The job's result if JobRemoved has named it (after process()), else None."""
        return self._jobs.pop(job, None)

    def watch(self, unit: str, callback: Callable[[], None]) -> None:
        """Call `callback` (from process()) whenever the unit's properties change. systemd sends
        those signals only while some client has called Subscribe: this one does."""
        self.subscribe()
        self._match(self.unit_path(unit), PROPERTIES, b"PropertiesChanged", lambda msg: callback())

    def props(self, unit: str) -> UnitProps:
        path = self.unit_path(unit)
        u = self._call(path, PROPERTIES, b"GetAll", b"s", [UNIT])
        try:
            s = self._call(path, PROPERTIES, b"GetAll", b"s", [SERVICE])
        except SvcdiagError:
            s = {}
        inv = u.get(b"InvocationID") or []
        return UnitProps(
            name=unit, load_state=_s(u.get(b"LoadState", b"")), active_state=_s(u.get(b"ActiveState", b"")),
            sub_state=_s(u.get(b"SubState", b"")), result=_s(s.get(b"Result", b"")),
            invocation=bytes(inv).hex() if inv else "", main_pid=int(s.get(b"MainPID", 0) or 0),
            exec_main_code=int(s.get(b"ExecMainCode", 0) or 0), exec_main_status=int(s.get(b"ExecMainStatus", 0) or 0),
            active_enter_ts=_ts(u.get(b"ActiveEnterTimestamp")), inactive_exit_ts=_ts(u.get(b"InactiveExitTimestamp")),
            state_change_ts=_ts(u.get(b"StateChangeTimestamp")), fragment_path=_s(u.get(b"FragmentPath", b"")),
            job=bool(u.get(b"Job") and u.get(b"Job")[0]),
            exec_start=tuple(tuple(_s(a) for a in entry[1]) for entry in s.get(b"ExecStart", []) or []),
        )
