"""systemd over D-Bus (pystemd): the one place that knows D-Bus.

One shared bus connection. Jobs are awaited through Subscribe + JobRemoved, and a unit's
state changes arrive as PropertiesChanged signals on the same connection, whose fd the
caller polls beside the journal's: nothing here sleeps or polls on a timer.

As root the connection is PID 1's own socket, /run/systemd/private (as systemctl's): systemd
writes each signal there itself, one hop and ~0.4 ms sooner than through dbus-daemon, and
every signal, for every unit (no match rules on a direct connection; sd-bus drops the ones
nobody asked for). Otherwise, or with SVCDIAG_BUS=system, the system bus. Each
PropertiesChanged carries every changing property of its interface, so `track` keeps a
unit's state from the signals alone, with no call back to systemd.
"""

from __future__ import annotations

import dataclasses
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
UNIT_PATH_PREFIX = b"/org/freedesktop/systemd1/unit/"
MANAGER = b"org.freedesktop.systemd1.Manager"
UNIT = b"org.freedesktop.systemd1.Unit"
SERVICE = b"org.freedesktop.systemd1.Service"
PROPERTIES = b"org.freedesktop.DBus.Properties"
#: waitid(2)'s si_code, as ExecMainCode reports it
CLD = {1: "exited", 2: "killed", 3: "dumped"}
CONNECT_RETRY_S = 2.0
#: how long PID 1 may take to re-execute (daemon-reexec) before its private socket is back
REEXEC_WAIT_S = 10.0
#: sd-bus's errors for a connection the other end closed (ECONNRESET, ENOTCONN, EPIPE)
_GONE = ("[err -104]", "[err -107]", "[err -32]")
#: PID 1's private socket (root only): signals straight from systemd, not relayed by dbus-daemon
PRIVATE_BUS = b"unix:path=/run/systemd/private"
NO_BUS = ("no system bus: systemd is not PID 1 here, so there is no unit to start or watch; "
          "run on a systemd host, or in the private rig: python -m svcdiag.systemd.rig run -- svcdiag ...")


#: where systemd says it runs as PID 1 (sd_booted), and the system bus's default socket (sd-bus's)
SYSTEMD_RUN_DIR = "/run/systemd/system"
SYSTEM_BUS_SOCKET = "/run/dbus/system_bus_socket"


def no_local_bus() -> bool:
    """Whether this host plainly has no bus to systemd: not booted with systemd, or neither PID 1's
    private socket nor the system bus's socket exists. Asked before any retry and before a command's
    other work, so a host without systemd hears NO_BUS at once (it took 4-7 s under load)."""
    if not os.path.isdir(SYSTEMD_RUN_DIR):
        return True
    addr = os.environ.get("DBUS_SYSTEM_BUS_ADDRESS", "")
    socket_path = addr.split("path=", 1)[1].split(",", 1)[0] if addr.startswith("unix:path=") else SYSTEM_BUS_SOCKET
    if addr and not addr.startswith("unix:path="):
        return False  # an address we do not read (abstract, tcp): let the connection say
    private = PRIVATE_BUS.split(b"=", 1)[1].decode()
    return not os.path.exists(socket_path) and not (os.geteuid() == 0 and os.path.exists(private))


@dataclass(frozen=True)
class UnitProps:
    """The unit properties svcdiag reads from systemd over D-Bus."""

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
    #: what the main process last told systemd in STATUS= (a notify unit's phase and news)
    status_text: str = ""

    @property
    def running(self) -> bool:
        return self.active_state in ("activating", "active", "reloading")

    @property
    def why_no_invocation(self) -> str:
        """Why a unit has no InvocationID: systemd unloads a cleanly stopped unit, and with it its last one."""
        return f"systemd keeps no invocation of it ({self.active_state}: stopped and unloaded, or not started since boot)"

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


def _int(v: Any) -> int:
    return int(v or 0)


def _id(v: Any) -> str:
    return bytes(v).hex() if v else ""


def _job(v: Any) -> bool:
    return bool(v and v[0])


#: D-Bus property → (UnitProps field, conversion), per interface: what GetAll and the signals share
UNIT_FIELDS: dict[bytes, tuple[str, Callable[[Any], Any]]] = {
    b"LoadState": ("load_state", _s), b"ActiveState": ("active_state", _s), b"SubState": ("sub_state", _s),
    b"InvocationID": ("invocation", _id), b"ActiveEnterTimestamp": ("active_enter_ts", _ts),
    b"InactiveExitTimestamp": ("inactive_exit_ts", _ts), b"StateChangeTimestamp": ("state_change_ts", _ts),
    b"FragmentPath": ("fragment_path", _s), b"Job": ("job", _job),
}
SERVICE_FIELDS: dict[bytes, tuple[str, Callable[[Any], Any]]] = {
    b"Result": ("result", _s), b"MainPID": ("main_pid", _int), b"ExecMainCode": ("exec_main_code", _int),
    b"ExecMainStatus": ("exec_main_status", _int), b"StatusText": ("status_text", _s),
}
_BY_INTERFACE = {UNIT: UNIT_FIELDS, SERVICE: SERVICE_FIELDS}
#: what `status` shows of a unit with a start (states(brief=True)), beside ListUnitsByNames' states
BRIEF = ((UNIT, b"ActiveEnterTimestamp", "active_enter_ts", _ts), (SERVICE, b"Result", "result", _s),
         (SERVICE, b"StatusText", "status_text", _s))
#: GetAll of every interface: both tables (their property names do not overlap)
_ALL_FIELDS = {**UNIT_FIELDS, **SERVICE_FIELDS}
_EMPTY = {"load_state": "", "active_state": "", "sub_state": "", "result": "", "invocation": "", "main_pid": 0,
          "exec_main_code": 0, "exec_main_status": 0, "active_enter_ts": None, "inactive_exit_ts": None,
          "state_change_ts": None, "fragment_path": "", "job": False}


def _fields(values: dict[bytes, Any], table: dict[bytes, tuple[str, Callable[[Any], Any]]]) -> dict[str, Any]:
    return {name: conv(values[key]) for key, (name, conv) in table.items() if key in values}


def apply_changes(props: UnitProps, interface: bytes, changed: dict[bytes, Any]) -> UnitProps:
    """`props` after a PropertiesChanged of `interface` (its changed-properties dict): systemd
    sends every property that can change in each one, so this is the unit's state now."""
    table = _BY_INTERFACE.get(bytes(interface))
    if table is None:
        return props
    fields = _fields(changed, table)
    return dataclasses.replace(props, **fields) if fields else props


class Tracked:
    """A unit's latest properties, kept by `Systemd.track` from its PropertiesChanged signals.
    A signal is only kept as it comes (reading one costs ~0.1 ms: not before the journal is
    read); the kept ones are read when `props` is asked for."""

    def __init__(self, props: UnitProps, ask: Callable[[], UnitProps]):
        self._props, self._ask = props, ask
        self._signals: list[Any] = []

    def add(self, msg: Any) -> None:
        self._signals.append(msg)

    def _apply(self, until: bytes | None = None) -> None:
        """Read the kept signals in order (all, or up to and including the first of `until`'s interface)."""
        while self._signals:
            msg = self._signals.pop(0)
            try:
                msg.process_reply(False)
                interface = bytes(msg.body[0])
                self._props = apply_changes(self._props, interface, msg.body[1])
            except (ValueError, TypeError, IndexError, KeyError):  # not the shape systemd sends: ask it
                self._props, self._signals = self._ask(), []
                return
            if interface == until:
                return

    @property
    def status_text(self) -> str:
        """StatusText, reading only the signals up to the Service interface's: PID 1 sends that one
        first, then the Unit's with every property (~0.1-0.4 ms to read), which can wait until the
        line the new STATUS= announces has been looked for."""
        self._apply(until=SERVICE)
        return self._props.status_text

    @property
    def props(self) -> UnitProps:
        self._apply()
        return self._props

    @props.setter
    def props(self, value: UnitProps) -> None:
        self._props, self._signals = value, []


class Systemd:
    def __init__(self, bus: Any, remote: Any = None, *, owns_remote: bool = True, direct: bool = False):
        self.bus = bus
        #: connected to PID 1 itself (its private socket), not through a bus daemon: messages carry no sender
        self.direct = direct
        self._owns_remote = owns_remote
        #: the SSH connection (svcdiag.systemd.remote.Connection) when systemd is on another host
        self.remote = remote
        self._subscribed = False
        self._jobs: dict[bytes, str] = {}
        self._callbacks: list[Callable[..., None]] = []  # pystemd keeps only a raw pointer
        #: what a new connection must set up again (PID 1 re-executed: its private connections closed)
        self._matches: list[tuple[bytes, bytes, bytes, Callable[..., None]]] = []
        self._watchers: list[tuple[str, Tracked | None, Callable[[], None]]] = []

    @classmethod
    def connect(cls, host: str | None = None) -> Systemd:
        """This host's systemd, or with `host` ([user@]HOST[:port]) that host's, over SSH."""
        if host:  # (the SSH module's import, ~1.5 ms of `status`, only where a host is named)
            from svcdiag.systemd import remote

            if not remote.is_local(host):
                conn = remote.connect(host)
                try:
                    return cls(conn.open_bus(), conn)
                except BaseException:
                    conn.close()
                    raise
        if no_local_bus():
            raise SvcdiagError(NO_BUS)
        direct = _private_bus()
        if direct is not None:
            return cls(direct, direct=True)
        from svcdiag.systemd.retry import briefly

        DBus = dbuslib().DBus

        def open_bus() -> Any:
            bus = DBus()
            bus.open()
            return bus

        # the bus can be away for a moment (dbus-daemon restarting): retry briefly, then say so
        try:
            return cls(briefly(open_bus, CONNECT_RETRY_S))
        except Exception:
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
        apply_signature = dbuslib().apply_signature

        try:
            return self.bus.call_method(DEST, path, interface, method,
                                        apply_signature(signature, list(args)) if signature else []).body
        except Exception as e:
            self._lost()
            text = str(e)
            if self._pid1_gone(text):  # PID 1 re-executed: once more, anew
                self._reconnect()
                return self._call(path, interface, method, signature, args)
            if "AccessDenied" in text or "access denied" in text.lower() or "interactive authentication" in text.lower() \
                    or "[err -13]" in text:  # EACCES: polkit said no (docs/polkit.md)
                raise AccessDenied(method.decode()) from None
            if "NoSuchUnit" in text or "not found" in text.lower():
                raise SvcdiagError(f"systemd: {text}") from None
            raise SvcdiagError(f"systemd {method.decode()} failed: {text}") from None

    def fileno(self) -> int:
        fd = self.bus.get_fd()
        if fd < 0 and self.direct:  # sd-bus saw PID 1 close the connection (daemon-reexec): a new one
            self._reconnect()
            fd = self.bus.get_fd()
        elif fd < 0 and self.remote is not None:  # the bridge over SSH is gone (sshd killed, network down)
            from svcdiag.systemd.remote import ConnectionLost

            raise ConnectionLost(f"{self.remote.target}: connection lost")
        elif fd < 0:
            raise SvcdiagError(f"the D-Bus connection to systemd closed (error {-fd})")
        return fd

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
        self._matches.append((path, interface, member, callback))
        self.bus.match_signal(None if self.direct else DEST, path, interface, member, callback)

    def _pid1_gone(self, error: str) -> bool:
        """A private connection's call or read failed because PID 1 closed it (daemon-reexec)."""
        return self.direct and any(code in error for code in _GONE)

    def _reconnect(self) -> None:
        """PID 1's private connection closed under us (`systemctl daemon-reexec`): connect again
        once the new PID 1 listens (else to the system bus), with the same matches and Subscribe;
        each watched unit's state is asked anew and its watcher called, as a signal would have.
        The fd changes: a poller of fileno() registers the new one."""
        deadline = time.monotonic() + REEXEC_WAIT_S
        bus = _private_bus()
        while bus is None and time.monotonic() < deadline:
            time.sleep(0.05)
            bus = _private_bus()
        old, self.direct = self.bus, bus is not None
        if bus is None:
            bus = dbuslib().DBus()
            bus.open()
        self.bus = bus
        try:
            old.close()
        except Exception:  # already closed by the other end: nothing to release but our handle
            pass
        for path, interface, member, callback in self._matches:
            bus.match_signal(None if self.direct else DEST, path, interface, member, callback)
        if self._subscribed:
            self._call(MANAGER_PATH, MANAGER, b"Subscribe")
        for unit, tracked, callback in self._watchers:
            if tracked is not None:
                tracked.props = self.props(unit)
            callback()

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
                if self._pid1_gone(str(e)):
                    self._reconnect()
                    continue
                raise
            if msg.is_empty():
                return

    def daemon_reload(self) -> None:
        self._call(MANAGER_PATH, MANAGER, b"Reload")

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
        self._match(unit_object_path(unit), PROPERTIES, b"PropertiesChanged", lambda msg: callback())
        self._watchers.append((unit, None, callback))

    def track(self, unit: str, props: UnitProps, callback: Callable[[], None]) -> Tracked:
        """Like `watch`, and keep `unit`'s properties (from `props` on) from the signals
        themselves: no method call per signal, so a follower woken by one reads the journal
        at once and knows the state (and STATUS=) after, from `Tracked.props`."""
        self.subscribe()
        tracked = Tracked(props, lambda: self.props(unit))

        def on_signal(msg: Any) -> None:
            tracked.add(msg)
            callback()

        self._match(unit_object_path(unit), PROPERTIES, b"PropertiesChanged", on_signal)
        self._watchers.append((unit, tracked, callback))
        return tracked

    def props(self, unit: str) -> UnitProps:
        """One round trip: GetAll with no interface named is every interface's properties (sd-bus),
        and asking the unit's object loads the unit, as LoadUnit would (`status`: a call per config)."""
        values = self._call(unit_object_path(unit), PROPERTIES, b"GetAll", b"s", [b""])
        return UnitProps(
            name=unit, **{**_EMPTY, **_fields(values, _ALL_FIELDS)},
            exec_start=tuple(tuple(_s(a) for a in entry[1]) for entry in values.get(b"ExecStart", []) or []),
        )

    def states(self, units: list[str], *, brief: bool = False) -> list[UnitProps]:
        """Each unit's properties for a listing (`status`), cheaper than `props` per unit: one
        ListUnitsByNames has every unit's states (it loads each, as asking its object does); a
        unit with no start has nothing more than its Result (two Gets, ~0.1 ms); a unit with one
        (an InvocationID) has all of `props` (GetAll, ~2 ms: PID 1 sends ~400 properties), or with
        `brief` only what `status` shows of it (BRIEF: three small Gets, and an active unit's InvocationID
        read from /run/systemd/units, journal.current_invocation; `props` has the rest)."""
        if not units:
            return []
        listed = self._call(MANAGER_PATH, MANAGER, b"ListUnitsByNames", b"as", [[u.encode() for u in units]])
        out = []
        for unit, row in zip(units, listed, strict=True):
            load, active, sub, path, job_id = (_s(row[2]), _s(row[3]), _s(row[4]), bytes(row[6]), row[7])
            base = {**_EMPTY, "load_state": load, "active_state": active, "sub_state": sub}
            idle = active in ("inactive", "failed") and not job_id
            invocation = None
            if brief and active == "active" and self.remote is None:  # PID 1's own export of it: a round trip fewer
                from svcdiag.systemd.journal import current_invocation

                exported = current_invocation(unit)
                invocation = bytes.fromhex(exported) if exported else None  # as D-Bus says it: 16 bytes
            if invocation is None and (idle or brief):
                invocation = self._get(path, UNIT, b"InvocationID")
            if idle and not invocation:
                out.append(UnitProps(name=unit, **{**base, "result": _s(self._get(path, SERVICE, b"Result"))}))
            elif brief:
                got = {name: conv(self._get(path, iface, prop)) for iface, prop, name, conv in BRIEF}
                out.append(UnitProps(name=unit, **{**base, **got, "invocation": _id(invocation), "job": bool(job_id)}))
            else:
                out.append(self.props(unit))
        return out

    def _get(self, path: bytes, interface: bytes, prop: bytes) -> Any:
        return self._call(path, PROPERTIES, b"Get", b"ss", [interface, prop])


def unit_object_path(unit: str) -> bytes:
    """systemd's object path of a unit, as sd_bus_path_encode makes it: every byte of the name
    that is not an ASCII letter (nor a digit after the first) as _xx. systemd loads the unit when
    its object is asked for, so this saves the LoadUnit round trip."""
    name = unit.encode()
    label = "".join(chr(b) if chr(b).isascii() and (chr(b).isalpha() or (i and chr(b).isdigit())) else f"_{b:02x}"
                    for i, b in enumerate(name))
    return UNIT_PATH_PREFIX + (label or "_").encode()


def dbuslib() -> Any:
    """pystemd's D-Bus module without pystemd's `__init__`, which imports its unit and machine classes
    and with them lxml (~20 ms of a `status` that needs none of it). A `pystemd` already imported is
    used as it is; else the package is stood in for only while its `dbuslib` loads, so that a later
    `import pystemd` still runs pystemd's own `__init__`."""
    import sys

    if "pystemd.dbuslib" in sys.modules:  # (an `import` statement would import the package first)
        return sys.modules["pystemd.dbuslib"]
    if "pystemd" in sys.modules:
        import pystemd.dbuslib

        return pystemd.dbuslib
    import importlib.util
    import types

    spec = importlib.util.find_spec("pystemd")
    if spec is None or not spec.submodule_search_locations:
        import pystemd.dbuslib  # the ImportError, as before

        return pystemd.dbuslib
    stand_in = types.ModuleType("pystemd")
    stand_in.__path__ = list(spec.submodule_search_locations)
    sys.modules["pystemd"] = stand_in
    try:
        import pystemd.dbuslib
    finally:
        if sys.modules.get("pystemd") is stand_in:
            del sys.modules["pystemd"]
    return sys.modules["pystemd.dbuslib"]


def _private_bus() -> Any:
    """PID 1's private socket, when this process may use it (root) and nobody said otherwise; else None."""
    if os.geteuid() != 0 or os.environ.get("SVCDIAG_BUS") == "system":
        return None
    path = PRIVATE_BUS.split(b"=", 1)[1].decode()
    if not os.path.exists(path):
        return None
    bus = dbuslib().DBusAddress(PRIVATE_BUS, peer_to_peer=True)
    try:
        bus.open()
    except Exception:  # pystemd's DBusError (PID 1 re-executing, a sandbox without the socket): the system bus
        return None
    return bus
