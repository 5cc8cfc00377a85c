"""Test hosts for the remote tests (docs/remote.md#tests): an sshd inside a private rig, listening
on its own loopback address (127.0.0.2, 127.0.0.3, ...: the rigs share the host's network, and
all of 127/8 is local) on a free port, key-only, with host keys, one client key and a
known_hosts made for this run. Nothing else is ever contacted."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..ports import free_port


@dataclass
class Sshd:
    """One test host: `rig` (its own systemd and journal), reached as root@addr:port."""

    rig: object
    dir: Path  # the run's keys and ssh_config, shared by every host of the run
    addr: str
    port: int
    unit: str

    @property
    def target(self) -> str:
        return f"root@{self.addr}:{self.port}"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    def env(self) -> dict[str, str]:
        return {"SVCDIAG_SSH_CONFIG": str(self.ssh_config)}

    def start(self) -> Sshd:
        self.rig.run(["systemd-run", f"--unit={self.unit}", "--collect", "-p", "RuntimeDirectory=sshd",
                      "-p", "KillMode=control-group", "/usr/sbin/sshd", "-D", "-e",
                      "-f", str(self.dir / f"sshd_config.{self.addr}")])
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection((self.addr, self.port), timeout=10) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                out = self.rig.run(["journalctl", "-u", self.unit, "--no-pager"], check=False).stdout.decode()
                raise AssertionError(f"sshd in the rig did not listen on {self.addr}:{self.port}: {out[-800:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        """sshd and every session it serves (their cgroup): the host's end sees the connection die."""
        self.rig.run(["systemctl", "kill", "--signal=KILL", self.unit], check=False)
        self.rig.run(["systemctl", "stop", self.unit], check=False)


def make_sshds(hosts: Sequence[tuple[object, str]], root: Path, *, known: bool = True) -> list[Sshd]:
    """An sshd in each (rig, loopback address), sharing one client key, known_hosts and ssh_config."""
    d = root / ".rig-tmp" / f"ssh-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    d.chmod(0o700)
    _keygen(d / "client_key")
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    known_lines, out = [], []
    for rig, addr in hosts:
        port = free_port(addr)
        _keygen(d / f"host_key.{addr}")
        (d / f"sshd_config.{addr}").write_text(
            f"ListenAddress {addr}:{port}\nHostKey {d}/host_key.{addr}\nAuthorizedKeysFile {d}/authorized_keys\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            "UsePAM no\nStrictModes no\nPidFile none\nSubsystem sftp internal-sftp\n")
        kind, key = (d / f"host_key.{addr}.pub").read_text().split()[:2]
        known_lines.append(f"[{addr}]:{port} {kind} {key}\n")
        out.append(Sshd(rig, d, addr, port, f"svcdiag-test-sshd-{port}"))
    (d / "known_hosts").write_text("".join(known_lines) if known else "")
    (d / "ssh_config").write_text(
        f"Host {' '.join(addr for _, addr in hosts)}\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
        "  LogLevel ERROR\n")
    return [s.start() for s in out]


def make_sshd(rig, root: Path, *, known: bool = True, addr: str = "127.0.0.1") -> Sshd:
    """One test host (bench/latency.py --ssh)."""
    return make_sshds([(rig, addr)], root, known=known)[0]


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
