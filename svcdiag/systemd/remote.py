"""A GPU host reached over SSH: the one place that knows SSH (docs/remote.md).

Nothing of ours runs on the remote host. One SSH master connection per host per command
(`ControlMaster`, a private `ControlPath`), and over it:

- D-Bus, as `systemctl -H` does: sd-bus's `unixexec:` transport runs
  `ssh … systemd-stdio-bridge` (pystemd's `DBusAddress`; `DBusRemote` is the same transport
  with no way to pass SSH options);
- the journal: `journalctl -o export [--follow] _SYSTEMD_INVOCATION_ID=ID + INVOCATION_ID=ID +
  MESSAGE_ID=<journald's dropped lines> OBJECT_SYSTEMD_UNIT=UNIT`, read by the export parser replay
  uses (svcdiag.systemd.journal_formats);
- files: `cat` to read, `cat > tmp && mv tmp path` to write atomically.

SSH's own configuration is respected (~/.ssh/config, the agent, known_hosts; `$SVCDIAG_SSH_CONFIG`
names another config file, as `ssh -F`). svcdiag adds only `BatchMode=yes` (never a prompt)
and the control socket options; a host key is never accepted on svcdiag's behalf.
"""

from __future__ import annotations

import collections
import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from svcdiag.errors import SvcdiagError
from svcdiag.sglang import lazy_re

if TYPE_CHECKING:  # subprocess, shutil, tempfile and the journal's formats are imported where SSH is used:
    import subprocess  # `Systemd.connect` asks `is_local` of every command, most with no host

#: how long the master connection may take to authenticate
CONNECT_TIMEOUT_S = 20.0
SSH_CONFIG_ENV = "SVCDIAG_SSH_CONFIG"
#: the remote command of the D-Bus transport: silent (exit 1) where there is no bridge, so
#: the failure is ours to explain in one line, not a shell's "command not found" on stderr
BRIDGE_CMD = "command -v systemd-stdio-bridge >/dev/null 2>&1 && exec systemd-stdio-bridge"
#: run by a notify unit's interpreter there (Connection.check_supervisor): its config's hash, or why not
SUPERVISOR_PROBE = """
import sys
try:
    from svcdiag.config.service import find_units_dir
except Exception as e:
    print(f"{type(e).__name__}: {e}")
    sys.exit(91)
try:
    cfg = find_units_dir(sys.argv[1]).load(sys.argv[2])
    if len(sys.argv) > 3:  # a node of a multi-node config: that node's own config
        cfg = next(n for n in cfg.node_configs() if n.node_rank == int(sys.argv[3]))
    print(cfg.config_hash)
except Exception as e:
    print(" ".join(str(e).split()))
    sys.exit(92)
"""
TARGET_RE = lazy_re.compile(r"^(?:(?P<user>[A-Za-z0-9_][A-Za-z0-9_.\-]*)@)?"
                       r"(?P<host>[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d{1,5}))?$")


class ConnectionLost(SvcdiagError):
    """The SSH connection to the host went away (sshd or the network died)."""


@dataclass(frozen=True, slots=True)
class Target:
    """[user@]HOST[:port], as `systemctl -H` and ssh take it."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, spec: str) -> Target:
        m = TARGET_RE.match(spec.strip())
        if m is None or (m.group("port") and not 1 <= int(m.group("port")) <= 65535):
            raise SvcdiagError(f"--host {spec!r}: not [user@]HOST[:port] (e.g. root@gpu-a or gpu-a:2222)")
        return cls(m.group("host").strip("[]"), m.group("user"), int(m.group("port")) if m.group("port") else None)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user + '@' if self.user else ''}{host}{f':{self.port}' if self.port else ''}"

    def args(self) -> list[str]:
        """ssh's arguments naming this host: -p PORT, -l USER, then the host."""
        out = ["-p", str(self.port)] if self.port else []
        out += ["-l", self.user] if self.user else []
        return [*out, "--", self.host]


def is_local(spec: str | None) -> bool:
    """No host, or this host by name: no SSH."""
    return spec is None or spec in ("", "localhost", "local")


def _explain(target: Target, stderr: str, rc: int | None) -> str:
    """ssh's failure as one line."""
    text = " ".join(stderr.split())
    last = next((ln.strip() for ln in reversed(stderr.strip().splitlines()) if ln.strip()), f"ssh exited {rc}")
    if "Host key verification failed" in text or "No ED25519 host key is known" in text \
            or ("host key for" in text.lower() and "not known" in text.lower()):
        return (f"{target}: host key unknown or changed (svcdiag never accepts one): check its fingerprint, "
                f"then add it to known_hosts (ssh-keyscan{' -p ' + str(target.port) if target.port else ''} {target.host})")
    if "Permission denied" in text or "Too many authentication failures" in text:
        return f"{target}: authentication refused ({last}); check the key, the agent, and the user name"
    if any(s in text for s in ("Connection refused", "No route to host", "Could not resolve", "Network is unreachable",
                               "Connection timed out", "Operation timed out", "Name or service not known",
                               "Connection closed by", "kex_exchange_identification")):
        return f"{target}: unreachable ({last})"
    return f"{target}: ssh failed ({last})"


class Connection:
    """One SSH master connection to a host, owned by this process; everything else multiplexes on it."""

    def __init__(self, target: Target):
        import tempfile

        self.target = target
        self._dir = Path(tempfile.mkdtemp(prefix="svcdiag-ssh."))
        self.control = self._dir / "ctl"
        self.master: subprocess.Popen[bytes] | None = None
        self._children: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------ the master

    @staticmethod
    def ssh() -> str:
        import shutil

        path = shutil.which("ssh")
        if path is None:
            raise SvcdiagError("ssh is not installed here (apt-get install -y openssh-client)")
        return path

    def options(self) -> list[str]:
        cfg = os.environ.get(SSH_CONFIG_ENV)
        base = ["-F", cfg] if cfg else []
        return [*base, "-o", "BatchMode=yes", "-o", f"ControlPath={self.control}", "-o", "ServerAliveInterval=5",
                "-o", "ServerAliveCountMax=2"]

    def argv(self, *remote: str) -> list[str]:
        """ssh over the master connection, running `remote` (one shell command line) there."""
        return [self.ssh(), *self.options(), "-o", "ControlMaster=no", "-T", *self.target.args(), *remote]

    def open(self, timeout: float = CONNECT_TIMEOUT_S) -> Connection:
        """Authenticate once; fail in one line (unreachable, auth refused, host key unknown)."""
        import subprocess

        err = open(self._dir / "master.err", "w+b")  # noqa: SIM115 -- read back on failure
        self.master = subprocess.Popen(
            [self.ssh(), *self.options(), "-o", "ControlMaster=yes", "-o", "ControlPersist=no",
             "-o", f"ConnectTimeout={int(timeout)}", "-N", *self.target.args()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.control.exists():  # the socket appears once authenticated
            rc = self.master.poll()
            if rc is not None or time.monotonic() > deadline:
                err.seek(0)
                text = err.read().decode(errors="replace")
                self.close()
                raise SvcdiagError(_explain(self.target, text, rc) if rc is not None
                                   else f"{self.target}: unreachable (no answer within {timeout:.0f} s)")
            time.sleep(0.01)
        err.close()
        return self

    def alive(self) -> bool:
        return self.master is not None and self.master.poll() is None

    def close(self) -> None:
        import shutil
        import subprocess

        for p in self._children:
            if p.poll() is None:
                p.kill()
            p.wait()
        self._children.clear()
        if self.master is not None and self.master.poll() is None:
            self.master.terminate()
            try:
                self.master.wait(5)
            except subprocess.TimeoutExpired:
                self.master.kill()
                self.master.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ commands there

    def run(self, command: str, *, input: bytes | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
        import subprocess

        if not self.alive():
            raise ConnectionLost(f"{self.target}: connection lost")
        try:
            return subprocess.run(self.argv(command), input=input, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise SvcdiagError(f"{self.target}: `{command}` did not finish within {timeout:.0f} s") from None

    def read_file(self, path: str) -> str | None:
        """A file's text there, or None when it does not exist."""
        p = self.run(f"cat -- {shlex.quote(path)} 2>/dev/null || {{ test -e {shlex.quote(path)} && exit 2 || exit 1; }}")
        if p.returncode == 1:
            return None
        if p.returncode != 0:
            raise SvcdiagError(f"{self.target}: cannot read {path}")
        return p.stdout.decode("utf-8", "replace")

    def write_atomic(self, path: str, text: str, mode: int = 0o644) -> None:
        """Temp file beside it, then rename: a reader there never sees half a file."""
        q = shlex.quote(path)
        tmp = shlex.quote(f"{path}.svcdiag-tmp.{os.getpid()}")
        p = self.run(f"umask 077 && cat > {tmp} && chmod {mode:o} {tmp} && mv -f {tmp} {q} || {{ rm -f {tmp}; exit 1; }}",
                     input=text.encode())
        if p.returncode != 0:
            why = p.stderr.decode(errors="replace").strip().splitlines()
            raise SvcdiagError(f"{self.target}: cannot write {path}: {why[-1] if why else 'permission denied'}")

    def check_supervisor(self, python: str, units_dir: str, name: str, config_hash: str,
                         node_rank: int | None = None) -> None:
        """A notify unit's main process there is `PYTHON -m svcdiag --units DIR supervise --config
        NAME`, which judges the start by that host's copy of the config: that interpreter, svcdiag
        under it and the same config, checked in one round trip, each missing piece one line."""
        rank = "" if node_rank is None else f" {int(node_rank)}"
        p = self.run(f"test -x {shlex.quote(python)} || exit 90; exec {shlex.quote(python)} - "
                     f"{shlex.quote(units_dir)} {shlex.quote(name)}{rank}", input=SUPERVISOR_PROBE.encode())
        said = (p.stdout.decode(errors="replace").strip().splitlines() or [""])[-1]
        why = {90: f"{python} is not there", 91: f"{python} there cannot import svcdiag ({said})",
               92: f"svcdiag there cannot load config {name} from {units_dir} ({said})"}.get(p.returncode)
        if why is None and p.returncode != 0:
            why = f"{python} there failed (exit {p.returncode}): {p.stderr.decode(errors='replace').strip()[-200:]}"
        if why is None and said != config_hash:
            why = f"its config {name} in {units_dir} differs from this one (hash {said or '?'} there, {config_hash} here)"
        if why is not None:
            raise SvcdiagError(f"{self.target}: {name} is a notify unit, whose main process is svcdiag supervise "
                               f"there, but {why}: install svcdiag and the units folder on the GPU host at the same "
                               'paths, or set readiness = "journal" (docs/remote.md#notify-mode-over-ssh)')

    def has_bridge(self) -> bool:
        return self.run("command -v systemd-stdio-bridge >/dev/null 2>&1").returncode == 0

    def forward(self, host: str, port: int) -> int | None:
        """A local port forwarded to host:port there (over the master), or None if ssh would not."""
        import subprocess

        p = subprocess.run([self.ssh(), *self.options(), "-O", "forward", "-L", f"0:{host}:{port}", *self.target.args()],
                           capture_output=True, timeout=15, check=False)
        out = p.stdout.decode().strip()
        return int(out) if p.returncode == 0 and out.isdigit() else None

    def popen(self, command: str) -> subprocess.Popen[bytes]:
        import subprocess

        proc = subprocess.Popen(self.argv(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, bufsize=0)
        self._children.append(proc)
        return proc

    # ------------------------------------------------------------ D-Bus

    def dbus_address(self) -> bytes:
        """sd-bus's unixexec: address running the stdio bridge over the master connection."""
        argv = self.argv(BRIDGE_CMD)
        parts = [f"path={_esc(argv[0])}"] + [f"argv{i}={_esc(a)}" for i, a in enumerate(argv)]
        return ("unixexec:" + ",".join(parts)).encode()

    def open_bus(self) -> object:
        from svcdiag.systemd.dbus import dbuslib

        bus = dbuslib().DBusAddress(self.dbus_address())
        try:
            bus.open()
        except Exception as e:  # pystemd's DBusError: the bridge is not there, or the bus refused us
            if not self.alive():
                raise ConnectionLost(f"{self.target}: connection lost") from None
            if not self.has_bridge():
                raise SvcdiagError(f"{self.target}: no systemd-stdio-bridge there (is systemd the init system, "
                                   "and the systemd package installed?)") from None
            raise SvcdiagError(f"{self.target}: cannot reach its system bus: {e}") from None
        return bus


def _esc(value: str) -> str:
    """A D-Bus address value: every byte outside [A-Za-z0-9_/.\\-] as %XX."""
    return "".join(c if re.match(r"[A-Za-z0-9_/.\-]", c) else "".join(f"%{b:02x}" for b in c.encode()) for c in value)


def connect(spec: str) -> Connection:
    return Connection(Target.parse(spec)).open()


# ---------------------------------------------------------------- the journal, streamed


class _NoHeads:
    """A remote journal has no files here to watch: its stream's fd is the only signal."""

    watchable = False  # ticking on changed() would learn nothing

    def changed(self) -> bool:
        return False

    def rescan(self) -> None:
        pass

    def close(self) -> None:
        pass


class _ExportStream:
    """`journalctl -o export MATCHES` on the remote host over the master connection, parsed on a
    thread and handed over through a pipe whose read end the caller polls. Without `follow`,
    read() returns once the host has printed them all; following, a stream that ends is a lost
    connection."""

    def __init__(self, conn: Connection, matches: str, parse: Callable[[IO[bytes]], Iterator[Any]], *,
                 follow: bool):
        self.conn, self.following = conn, follow
        self.proc = conn.popen(f"journalctl -q --no-pager -o export {'--follow --lines=all' if follow else ''} "
                               f"{matches}")
        self._parse = parse
        self._queue: collections.deque[Any] = collections.deque()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self.ended = False
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        try:
            for item in self._parse(self.proc.stdout):
                self._queue.append(item)
                os.write(self._w, b".")
        except (OSError, ValueError, SvcdiagError):
            pass
        finally:
            self.ended = True
            try:
                os.write(self._w, b"!")
            except OSError:
                pass

    def fileno(self) -> int:
        return self._r

    def on_fd_event(self) -> None:
        try:
            while os.read(self._r, 65536):
                pass
        except BlockingIOError:
            pass

    def read(self) -> Iterator[Any]:
        if not self.following:
            self._thread.join()  # journalctl without --follow ends once it has printed them all
        self.on_fd_event()
        while self._queue:
            yield self._queue.popleft()
        if self.ended and self.following and not self._queue:  # a record that came meanwhile is read next time
            raise ConnectionLost(f"{self.conn.target}: connection lost (the journal stream ended)")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


class RemoteFollower(_ExportStream):
    """One invocation's entries on a remote host, as records, as svcdiag.systemd.journal.Follower
    gives them locally."""

    def __init__(self, conn: Connection, unit: str, invocation: str, *, follow: bool = True):
        from svcdiag.systemd.journal_formats import JOURNAL_DROPPED, records

        self.unit, self.invocation = unit, invocation
        self.heads = _NoHeads()
        inv = shlex.quote(invocation)
        name = f"{conn.target}:journal"

        def this_start(stream: Any) -> Iterator[Any]:
            for rec in records("export", b"", stream, name):
                if not rec.dropped or rec.invocation in (None, invocation):  # not an earlier start's dropped lines
                    yield rec

        # and journald's record of the unit's lines it dropped (the same fields AND-ed within a `+` term)
        super().__init__(conn, f"_SYSTEMD_INVOCATION_ID={inv} + INVOCATION_ID={inv} + MESSAGE_ID={JOURNAL_DROPPED} "
                         f"OBJECT_SYSTEMD_UNIT={shlex.quote(unit)}", this_start, follow=follow)


class RemoteEvents(_ExportStream):
    """svcdiag's own records in a remote host's journal (`SVCDIAG_SCHEMA=`), as export entries'
    fields: what `svcdiag events --host` reads."""

    def __init__(self, conn: Connection, schema: int, *, since: float | None = None, follow: bool = False):
        from svcdiag.systemd.journal_formats import export_entries

        when = f"--since=@{int(since)}" if since is not None else ""
        super().__init__(conn, f"{when} SVCDIAG_SCHEMA={int(schema)}", lambda stream: export_entries(b"", stream),
                         follow=follow)
