"""svcdiag's own files: where its state is kept, and atomic writes (a reader sees the old
file or the new one, never half of either)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

DEFAULT_STATE_DIR = "/var/lib/svcdiag"

#: State (calibration, history, snapshots, caches, bundles) is its owner's only: files 0600 in
#: folders 0700 (docs/security.md). What others must read says so: units and the Prometheus
#: textfile are written 0644.
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
#: A shared store (`svcdiag setup`'s /var/lib/svcdiag): group `svcdiag`, setgid so that what is made
#: there is the group's too, and the history database (and SQLite's -wal, -shm) group-writable
#: (docs/polkit.md): root's starts and an operator's are one history.
SHARED_GROUP = "svcdiag"
SHARED_DIR = 0o2770
SHARED_FILE = 0o660


def state_dir(option: str | None) -> Path:
    """--state-dir, else $SVCDIAG_STATE_DIR, else /var/lib/svcdiag; a file there is one line, exit 2
    (not an empty history read from nowhere)."""
    path = Path(option or os.environ.get("SVCDIAG_STATE_DIR") or DEFAULT_STATE_DIR)
    if path.exists() and not path.is_dir():
        from svcdiag.errors import SvcdiagError

        given = "--state-dir" if option else "$SVCDIAG_STATE_DIR" if os.environ.get("SVCDIAG_STATE_DIR") else "state dir"
        raise SvcdiagError(f"{given} {path}: not a directory")
    return path


def private_dir(path: Path) -> Path:
    """`path` and any missing parents, created 0700 (an existing folder keeps its mode)."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    return path


def shared(folder: Path) -> bool:
    """Whether `folder` is a group's shared store: setgid and group-writable (SHARED_DIR)."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return bool(mode & stat.S_ISGID) and mode & 0o070 == 0o070


def write_atomic(path: Path, text: str, mode: int = PRIVATE_FILE) -> None:
    """Write beside the target, fsync, rename: a reader sees the old file or the new, never half.
    The file is its owner's only unless `mode` says otherwise (missing folders likewise)."""
    path.parent.mkdir(mode=0o755 if mode & 0o044 else PRIVATE_DIR, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(path.parent, os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)

