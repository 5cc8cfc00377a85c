"""A private systemd for tests and demos: PID 1 in its own namespaces, on a tmpfs overlay
of the host's root, with journald and D-Bus (docs/live.md#the-private-systemd-rig).

`python -m svcdiag.systemd.rig run -- CMD...` boots it, runs CMD inside from the project folder
(exactly as on a host), and tears it down with nothing left behind. Never boots systemd on
the real root: its tmpfiles step would empty the host's /tmp.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from svcdiag.errors import SvcdiagError

BOOT_SCRIPT = r"""#!/bin/bash
# rig-boot PROJECT_DIR EMPTY_DIR: run under `unshare --mount --propagation private`
set -euo pipefail
PROJ=$(realpath "$1")
R="$2"   # not under /tmp or /run; its mounts vanish with the mount namespace
mount -t tmpfs -o size=4G tmpfs "$R"
mkdir -p "$R"/upper "$R"/work "$R"/root
mount -t overlay overlay -o lowerdir=/,upperdir="$R"/upper,workdir="$R"/work "$R"/root
mount -t tmpfs tmpfs /run
systemd-id128 new > "$R"/root/etc/machine-id
# journald keeps its files in /run (volatile): quick, and gone with the rig
mkdir -p "$R"/root/etc/systemd/journald.conf.d
printf '[Journal]\nStorage=volatile\nRateLimitBurst=0\n' > "$R"/root/etc/systemd/journald.conf.d/svcdiag-rig.conf
# boot to a small target: journald, D-Bus and what basic.target pulls in, none of the
# host's own services (a database, a web server) that multi-user.target would start
cat > "$R"/root/etc/systemd/system/svcdiag-rig.target <<'UNIT'
[Unit]
Description=svcdiag test rig
Requires=basic.target dbus.socket systemd-journald.service
After=basic.target dbus.socket systemd-journald.service
AllowIsolate=yes
UNIT
ln -sf svcdiag-rig.target "$R"/root/etc/systemd/system/default.target
exec systemd-nspawn -D "$R"/root --register=no --keep-unit -M "${RIG_NAME:-svcdiag-rig}" \
     --boot --console=passive --quiet --bind="$PROJ":"$PROJ"
"""


def available() -> str | None:
    """Why this machine cannot boot the rig, or None when it can."""
    if os.geteuid() != 0:
        return "the private systemd rig needs root (it mounts an overlay and runs systemd-nspawn)"
    for tool in ("systemd-nspawn", "unshare", "nsenter", "systemd-id128"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install -y systemd-container)"
    if not Path("/lib/systemd/systemd").exists() and not Path("/usr/lib/systemd/systemd").exists():
        return "systemd is not installed (apt-get install -y systemd)"
    return None


class Rig:
    def __init__(self, project: Path, name: str = "svcdiag-rig"):
        self.project = project.resolve()
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid1: int | None = None
        self._script: Path | None = None
        self._root: Path | None = None

    # ------------------------------------------------------------ lifecycle

    def boot(self, timeout: float = 60.0) -> Rig:
        if self.proc is not None:  # a second boot would orphan the first container
            raise SvcdiagError(f"the rig {self.name} is already booted")
        why = available()
        if why:
            raise SvcdiagError(why)
        atexit.register(self.down)  # an owner that dies of an exception still tears the rig down
        try:
            return self._boot(timeout)
        except BaseException:
            self.down()  # a rig that did not come up must not outlive the attempt
            raise

    def _boot(self, timeout: float) -> Rig:
        fd, path = tempfile.mkstemp(prefix="svcdiag-rig-boot.", suffix=".sh")
        with os.fdopen(fd, "w") as f:
            f.write(BOOT_SCRIPT)
        os.chmod(path, 0o755)
        self._script = Path(path)
        base = Path("/mnt") if Path("/mnt").is_dir() else Path("/var/tmp")  # never /tmp or /run
        self._root = Path(tempfile.mkdtemp(prefix="svcdiag-rig.", dir=base))
        log = open(tempfile.mkstemp(prefix="svcdiag-rig.", suffix=".log")[1], "wb")  # noqa: SIM115 -- the booted rig keeps it
        self._log_path = log.name
        self.proc = subprocess.Popen(
            # bash reads the script rather than exec'ing it: a file still open for writing in a child
            # another thread is forking (rigs boot in parallel) fails exec with ETXTBSY, "Text file busy"
            ["unshare", "--mount", "--propagation", "private", "/bin/bash", path, str(self.project), str(self._root)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            env={**os.environ, "RIG_NAME": self.name})
        deadline = time.monotonic() + timeout
        while self.pid1 is None:
            if self.proc.poll() is not None:
                raise SvcdiagError(f"the rig did not boot: {self._log_tail()}")
            if time.monotonic() > deadline:
                raise SvcdiagError(f"the rig did not boot within {timeout:.0f} s: {self._log_tail()}")
            self.pid1 = self._find_pid1()
            time.sleep(0.05)
        while True:  # PID 1 needs a moment before its private bus socket exists
            try:
                state = self.run(["systemctl", "is-system-running", "--wait"], timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                jobs = self.run(["systemctl", "list-jobs", "--no-legend"], timeout=10, check=False).stdout
                raise SvcdiagError(f"the rig's systemd did not finish booting within {timeout:.0f} s; "
                                   f"jobs: {jobs.decode(errors='replace').strip()[:300]}") from None
            # "offline": systemctl found no /run/systemd/system yet (sd_booted), PID 1 has only begun
            if state.stdout.strip() not in (b"", b"offline") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if state.stdout.strip() not in (b"running", b"degraded"):
            raise SvcdiagError(f"the rig's systemd is {state.stdout.decode().strip() or 'not answering'}")
        return self

    def _log_tail(self) -> str:
        try:
            return Path(self._log_path).read_text(errors="replace").strip().splitlines()[-1]
        except (OSError, IndexError):
            return "no output"

    def _find_pid1(self) -> int | None:
        """The container's systemd: a child (or grandchild) of our process, which unshare and
        the boot script exec'd into systemd-nspawn."""
        assert self.proc is not None
        for child in _children(self.proc.pid):
            for pid in (child, *_children(child)):
                if _comm(pid) == "systemd":
                    return pid
        return None

    def down(self, timeout: float = 20.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:  # unshare exec'd the boot script, which exec'd systemd-nspawn: one process
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._script is not None:
            self._script.unlink(missing_ok=True)
        Path(getattr(self, "_log_path", "/nonexistent")).unlink(missing_ok=True)
        if getattr(self, "_root", None) is not None:
            try:
                self._root.rmdir()  # empty on the host: the tmpfs was only ever in the namespace
            except OSError:
                pass
        self.proc = None
        self.pid1 = None

    def __enter__(self) -> Rig:
        return self.boot()

    def __exit__(self, *exc: object) -> None:
        self.down()

    # ------------------------------------------------------------ commands inside

    def argv(self, cmd: list[str] | str, cwd: Path | None = None) -> list[str]:
        assert self.pid1 is not None, "the rig is not running"
        script = cmd if isinstance(cmd, str) else shlex.join(cmd)
        where = shlex.quote(str(cwd or self.project))
        path = f"{self.project}/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        return ["nsenter", "-t", str(self.pid1), "-m", "-u", "-i", "-n", "-p", "-C",
                "env", "-i", f"PATH={path}", "LANG=C.UTF-8", "HOME=/root", "TERM=dumb",
                "sh", "-c", f"cd {where} && {script}"]

    def run(self, cmd: list[str] | str, *, timeout: float = 120.0, check: bool = True,
            input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(self.argv(cmd), capture_output=True, timeout=timeout, input=input, cwd="/", check=False)
        if check and proc.returncode != 0:
            raise SvcdiagError(f"in the rig: {cmd!r} exited {proc.returncode}: "
                               f"{proc.stderr.decode(errors='replace').strip()[-500:]}")
        return proc

    def popen(self, cmd: list[str] | str, **kw: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(cmd), cwd="/", **kw)  # type: ignore[call-overload]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "run":
        print("usage: python -m svcdiag.systemd.rig run -- CMD [ARG...]", file=sys.stderr)
        return 2
    cmd = args[1:]
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    project = Path.cwd()
    try:
        with Rig(project) as rig:
            print(f"rig: private systemd booted (PID {rig.pid1}); running {shlex.join(cmd)}", file=sys.stderr)
            proc = subprocess.run(rig.argv(cmd), cwd="/", check=False)
            return proc.returncode
    except SvcdiagError as e:
        print(f"svcdiag: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
