"""svcdiag's own files: where its state is kept, and atomic writes (a reader sees the old
file or the new one, never half of either)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DEFAULT_STATE_DIR = "/var/lib/svcdiag"

def state_dir(option: str | None) -> Path:
    return Path(option or os.environ.get("SVCDIAG_STATE_DIR") or DEFAULT_STATE_DIR)



def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write beside the target, fsync, rename: a reader sees the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
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

