"""An sshd inside the private rig, for the remote-host tests (docs/remote.md#tests): listening
on 127.0.0.1 (the rig shares the host's network) on a free port, key-only, with a host key,
a client key and a known_hosts made for this run. Nothing else is ever contacted."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Sshd:
    rig: object
    dir: Path
    port: int
    unit: str

    @property
    def target(self) -> str:
        return f"root@127.0.0.1:{self.port}"

    @property
    def alias(self) -> str:
        """The same host by another name: a second SSH connection."""
        return f"root@localhost:{self.port}"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    def env(self) -> dict[str, str]:
        return {"SVCDIAG_SSH_CONFIG": str(self.ssh_config)}

    def start(self) -> Sshd:
        self.rig.run(["systemd-run", f"--unit={self.unit}", "--collect", "-p", "RuntimeDirectory=sshd",
                      "-p", "KillMode=control-group", "/usr/sbin/sshd", "-D", "-e", "-f", str(self.dir / "sshd_config")])
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                out = self.rig.run(["journalctl", "-u", self.unit, "--no-pager"], check=False).stdout.decode()
                raise AssertionError(f"sshd in the rig did not listen on {self.port}: {out[-800:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        """sshd and every session it serves (their cgroup): the host's end sees the connection die."""
        self.rig.run(["systemctl", "kill", "--signal=KILL", self.unit], check=False)
        self.rig.run(["systemctl", "stop", self.unit], check=False)


def make_sshd(rig, root: Path, *, known: bool = True) -> Sshd:
    d = root / ".rig-tmp" / f"ssh-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    d.chmod(0o700)
    port = free_port()
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    (d / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1:{port}\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        "UsePAM no\nStrictModes no\nPidFile none\nSubsystem sftp internal-sftp\n")
    host_pub = (d / "host_key.pub").read_text().split()
    # two names for the one host ("127.0.0.1" and "localhost"): `events --host A --host B` sees two hosts
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port},[localhost]:{port} {host_pub[0]} {host_pub[1]}\n" if known else "")
    (d / "ssh_config").write_text(
        f"Host 127.0.0.1 localhost\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n"
        "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n")
    return Sshd(rig, d, port, f"svcdiag-test-sshd-{port}").start()
